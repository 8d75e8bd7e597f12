// The upload snippets of Firebase's guide as a Swift 6 program writes them: top-level code in
// main.swift, compiled in the Swift 6 language mode with default settings, with
// `import HoistStorage` for `import FirebaseStorage`. Top-level closures there are inferred
// `@MainActor`; Hoist calls handlers on its callback queue, so its handler types are
// `@Sendable` (see StorageObservableTask). `Swift6SnippetTests` runs this program and reads
// what it prints.
//
//   hoist-swift6-snippets file:///tmp/bucket
import Foundation
import HoistStorage

let storage = Storage.storage(url: CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "file:.hoist/bucket")
let storageRef = storage.reference()
let done = DispatchSemaphore(value: 0)

// Upload from data in memory, then get its download URL: the snippet that crashed with
// `Illegal instruction` (dispatch_assert_queue) when handlers were plain closures.
let data = Data("rivers, from memory".utf8)
let riversRef = storageRef.child("images/rivers.jpg")
let uploadTask = riversRef.putData(data, metadata: nil) { (metadata, error) in
  _ = [1, 2, 3].map { $0 * 2 }
  guard let metadata = metadata else {
    print("putData failed: \(String(describing: error))")
    done.signal()
    return
  }
  let size = metadata.size
  print("putData: \(size) bytes")
  riversRef.downloadURL { (url, error) in
    guard let downloadURL = url else {
      print("downloadURL failed: \(String(describing: error))")
      done.signal()
      return
    }
    print("downloadURL: \(downloadURL.lastPathComponent)")
    done.signal()
  }
}
done.wait()

// Upload a file with metadata and observe it, adding and removing an observer as the guide
// does. The task runs from `putFile` on, and the callback queue is not this thread's, so the
// removed observer may already have heard a progress event made before its removal: it prints
// nothing (ObserverRemovalTests prove removal on tasks whose events wait for it).
let localFile = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("hoist-swift6-\(getpid()).jpg")
try Data(repeating: 0x5A, count: 3 << 20).write(to: localFile)
let metadata = StorageMetadata()
metadata.contentType = "image/jpeg"
let mountainsRef = storageRef.child("images/mountains.jpg")
let fileTask = mountainsRef.putFile(from: localFile, metadata: metadata)
let removed = fileTask.observe(.progress) { snapshot in
  _ = snapshot.progress   // a progress event occurred
}
fileTask.removeObserver(withHandle: removed)
fileTask.observe(.progress) { snapshot in
  let percentComplete = 100.0 * Double(snapshot.progress!.completedUnitCount) / Double(snapshot.progress!.totalUnitCount)
  if percentComplete == 100 { print("progress: 100%") }
}
fileTask.observe(.success) { snapshot in
  print("putFile: \(snapshot.metadata?.contentType ?? "?"), \(snapshot.metadata?.size ?? 0) bytes")
  done.signal()
}
fileTask.observe(.failure) { snapshot in
  if let error = snapshot.error as? NSError {
    switch StorageErrorCode(rawValue: error.code)! {
    case .objectNotFound: print("putFile failed: objectNotFound")
    default: print("putFile failed: \(error.localizedDescription)")
    }
  }
  done.signal()
}
done.wait()
try? FileManager.default.removeItem(at: localFile)

// The Result and async forms.
storageRef.child("notes/result.txt").putData(Data("result".utf8)) { result in
  switch result {
  case .success(let metadata): print("Result: \(metadata.name ?? "?")")
  case .failure(let error): print("Result failed: \(error)")
  }
  done.signal()
}
done.wait()
let stored = try await storageRef.child("notes/async.txt").putDataAsync(Data("async".utf8))
print("async: \(stored.size) bytes")
