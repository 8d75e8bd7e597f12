// The Swift snippets of Firebase's "Upload files with Cloud Storage on Apple platforms" guide,
// run against a local bucket. Each snippet is as the guide writes it, with `import HoistStorage`
// in place of `import FirebaseStorage`; around it, a little code waits for the upload and
// prints what happened.
//
//   swift run hoist-examples                       # bucket: $HOIST_STORAGE_URL, else ./.hoist/bucket
//   HOIST_STORAGE_URL=file:///tmp/b swift run hoist-examples
import Foundation
import HoistStorage

let storage = Storage.storage()

/// Waits for a task to succeed or fail and prints the outcome.
func finish(_ label: String, _ task: StorageUploadTask) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        task.observe(.success) { snapshot in
            let metadata = snapshot.metadata
            print("\(label): stored \(snapshot.reference.fullPath), \(metadata?.size ?? 0) bytes, \(metadata?.contentType ?? "?")")
            done.resume()
        }
        task.observe(.failure) { snapshot in
            let error = snapshot.error as? NSError
            print("\(label): failed: \(StorageErrorCode(rawValue: error?.code ?? 0)?.name ?? "?"): \(error?.localizedDescription ?? "")")
            done.resume()
        }
    }
}

/// The guide uploads a local file at the relative path "path/to/image"; make one.
func makeLocalImage() throws {
    try FileManager.default.createDirectory(atPath: "path/to", withIntermediateDirectories: true)
    var bytes = Data([0xFF, 0xD8, 0xFF, 0xE0])
    bytes.append(Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
    try bytes.write(to: URL(fileURLWithPath: "path/to/image"))
}

// MARK: - Create a reference

func createReference() {
    // Create a root reference
    let storageRef = storage.reference()

    // Create a reference to "mountains.jpg"
    let mountainsRef = storageRef.child("mountains.jpg")

    // Create a reference to 'images/mountains.jpg'
    let mountainImagesRef = storageRef.child("images/mountains.jpg")

    // While the file names are the same, the references point to different files
    print("create references: names equal: \(mountainsRef.name == mountainImagesRef.name)")            // true
    print("create references: full paths equal: \(mountainsRef.fullPath == mountainImagesRef.fullPath)")    // false
}

// MARK: - Upload from data in memory

func uploadFromMemory() async {
    let storageRef = storage.reference()
    // Data in memory
    let data = Data("rivers, from memory".utf8)

    // Create a reference to the file you want to upload
    let riversRef = storageRef.child("images/rivers.jpg")

    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        // Upload the file to the path "images/rivers.jpg"
        let uploadTask = riversRef.putData(data, metadata: nil) { (metadata, error) in
            guard let metadata = metadata else {
                // Uh-oh, an error occurred!
                print("upload from memory: failed: \(error!.localizedDescription)")
                done.resume()
                return
            }
            // Metadata contains file metadata such as size, content-type.
            let size = metadata.size
            // You can also access to download URL after upload.
            riversRef.downloadURL { (url, error) in
                guard let downloadURL = url else {
                    // Uh-oh, an error occurred!
                    print("upload from memory: no download URL: \(error!.localizedDescription)")
                    done.resume()
                    return
                }
                print("upload from memory: \(size) bytes, download URL \(downloadURL)")
                done.resume()
            }
        }
        _ = uploadTask
    }

    // The guide's async form. It throws a `StorageError`, whose cases say what went wrong.
    do {
        let metadata = try await riversRef.putDataAsync(data)
        print("upload from memory (async): generation \(metadata.generation)")
    } catch let error as StorageError {
        print("upload from memory (async): failed: \(error.code.name): \(error.localizedDescription)")
    } catch {
        print("upload from memory (async): failed: \(error.localizedDescription)")
    }
}

// MARK: - Upload from a local file

func uploadFromFile() async {
    let storageRef = storage.reference()
    // File located on disk
    let localFile = URL(string: "path/to/image")!

    // Create a reference to the file you want to upload
    let riversRef = storageRef.child("images/rivers.jpg")

    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        // Upload the file to the path "images/rivers.jpg"
        let uploadTask = riversRef.putFile(from: localFile, metadata: nil) { metadata, error in
            guard let metadata = metadata else {
                // Uh-oh, an error occurred!
                print("upload from file: failed: \(error!.localizedDescription)")
                done.resume()
                return
            }
            // Metadata contains file metadata such as size, content-type.
            let size = metadata.size
            // You can also access to download URL after upload.
            riversRef.downloadURL { (url, error) in
                guard let downloadURL = url else {
                    // Uh-oh, an error occurred!
                    done.resume()
                    return
                }
                print("upload from file: \(size) bytes, \(metadata.contentType ?? "?"), download URL \(downloadURL)")
                done.resume()
            }
        }
        _ = uploadTask
    }
}

// MARK: - Add file metadata

func uploadWithMetadata() async {
    let storageRef = storage.reference()
    let data = Data("mountains".utf8)
    let localFile = URL(string: "path/to/image")!

    // Create storage reference
    let mountainsRef = storageRef.child("images/mountains.jpg")

    // Create file metadata including the content type
    let metadata = StorageMetadata()
    metadata.contentType = "image/jpeg"

    // Upload data and metadata
    await finish("metadata (data)", mountainsRef.putData(data, metadata: metadata))

    // Upload file and metadata
    await finish("metadata (file)", mountainsRef.putFile(from: localFile, metadata: metadata))
}

// MARK: - Manage uploads

func manageUploads() async {
    let storageRef = storage.reference()
    let localFile = URL(string: "path/to/image")!

    // Start uploading a file. (The guide uploads to the root reference here, which can hold no
    // object: Hoist fails that task with invalidArgument. Upload below the root instead.)
    let uploadTask = storageRef.child("images/managed.jpg").putFile(from: localFile)

    // Pause the upload
    uploadTask.pause()

    // Resume the upload
    uploadTask.resume()

    // Cancel the upload
    uploadTask.cancel()

    await finish("manage uploads", uploadTask)

    // The guide's own line, on the root reference: a clear error, not a crash.
    await finish("upload to the root", storageRef.putFile(from: localFile))
}

// MARK: - Monitor upload progress

func monitorProgress() async {
    let storageRef = storage.reference()
    let localFile = URL(string: "path/to/image")!
    let uploadTask = storageRef.child("images/progress.jpg").putFile(from: localFile)

    // Add a progress observer to an upload task
    let observer = uploadTask.observe(.progress) { snapshot in
        // A progress event occurred
        print("monitor progress: \(snapshot.progress!.completedUnitCount) of \(snapshot.progress!.totalUnitCount) bytes")
    }
    _ = observer
    await finish("monitor progress", uploadTask)
}

// MARK: - Remove observers

func removeObservers() async {
    let storageRef = storage.reference()
    let localFile = URL(string: "path/to/image")!
    let uploadTask = storageRef.child("images/quiet.jpg").putFile(from: localFile)

    // Create a task listener handle
    let observer = uploadTask.observe(.progress) { snapshot in
        // A progress event occurred
        print("remove observers: this line never prints")
    }

    // Remove an individual observer
    uploadTask.removeObserver(withHandle: observer)

    // Remove all observers of a particular status
    uploadTask.removeAllObservers(for: .progress)

    // Remove all observers
    uploadTask.removeAllObservers()

    await finish("remove observers", uploadTask)
}

// MARK: - Full example

func fullExample() async {
    let storageRef = storage.reference()
    // Local file you want to upload
    let localFile = URL(string: "path/to/image")!

    // Create the file metadata
    let metadata = StorageMetadata()
    metadata.contentType = "image/jpeg"

    // Upload file and metadata to the object 'images/mountains.jpg'
    let uploadTask = storageRef.child("images/mountains.jpg").putFile(from: localFile, metadata: metadata)

    // Listen for state changes, errors, and completion of the upload.
    uploadTask.observe(.resume) { snapshot in
        // Upload resumed, also fires when the upload starts
        print("full example: resume")
    }

    uploadTask.observe(.pause) { snapshot in
        // Upload paused
        print("full example: pause")
    }

    uploadTask.observe(.progress) { snapshot in
        // Upload reported progress
        let percentComplete = 100.0 * Double(snapshot.progress!.completedUnitCount)
            / Double(snapshot.progress!.totalUnitCount)
        if percentComplete.isFinite { print("full example: \(Int(percentComplete))%") }
    }

    uploadTask.observe(.success) { snapshot in
        // Upload completed successfully
        print("full example: success, md5 \(snapshot.metadata?.md5Hash ?? "?")")
    }

    uploadTask.observe(.failure) { snapshot in
        if let error = snapshot.error as? NSError {
            switch (StorageErrorCode(rawValue: error.code)!) {
            case .objectNotFound:
                // File doesn't exist
                break
            case .unauthorized:
                // User doesn't have permission to access file
                break
            case .cancelled:
                // User canceled the upload
                break

            /* ... */

            case .unknown:
                // Unknown error occurred, inspect the server response
                break
            default:
                // A separate error occurred. This is a good place to retry the upload.
                break
            }
        }
    }
    await finish("full example", uploadTask)

    // The same error switch, on a file that does not exist: as in FirebaseStorage, that is
    // `unknown`, with a message naming the file.
    await finish("missing file", storageRef.child("images/none.jpg").putFile(from: URL(string: "path/to/missing")!))

    // The modern form: `async` throws a `StorageError`; switch over its cases.
    do {
        _ = try await storageRef.child("images/none.jpg").putFileAsync(from: URL(string: "path/to/missing")!)
    } catch let error as StorageError {
        switch error {
        case .objectNotFound(let object, _):
            print("missing file (async): no object \(object)")
        case .unauthorized(let bucket, let object, _):
            print("missing file (async): no permission for gs://\(bucket)/\(object)")
        case .cancelled:
            print("missing file (async): cancelled")
        case .unknown(let message, _):
            // The file is not there (or is a directory, or a symbolic link).
            print("missing file (async): unknown: \(message)")
        default:
            print("missing file (async): \(error.localizedDescription)")
        }
    } catch {
        print("missing file (async): \(error)")
    }
}

let workdir = FileManager.default.temporaryDirectory.appendingPathComponent("hoist-examples-\(getpid())")
try FileManager.default.createDirectory(at: workdir, withIntermediateDirectories: true)
print("bucket: \(storage.url) (\(storage.reference().bucket))")
guard FileManager.default.changeCurrentDirectoryPath(workdir.path) else { fatalError("cannot enter \(workdir.path)") }
try makeLocalImage()
createReference()
await uploadFromMemory()
await uploadFromFile()
await uploadWithMetadata()
await manageUploads()
await monitorProgress()
await removeObservers()
await fullExample()
try? FileManager.default.removeItem(at: workdir)
