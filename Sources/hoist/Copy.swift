import ArgumentParser
import Foundation
import HoistStorage

extension Hoist {
    /// `hoist cp FILE... DEST`: ad-hoc uploads through the HoistStorage API.
    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cp",
            abstract: "Upload files to a bucket.",
            discussion: """
                DEST is an object path in the bucket named by --storage. A DEST ending in '/' is a \
                prefix: each file keeps its name under it. One file to a DEST without '/' at the \
                end is stored under exactly that name.
                """
        )

        @Option(name: .long, help: "The bucket: file:///ABS/DIR or file:REL/DIR. Default: $HOIST_STORAGE_URL, else file:.hoist/bucket.")
        var storage: String?

        @Option(name: [.short, .long], help: "How many uploads run at once.")
        var concurrency: Int = 4

        @Option(name: .long, help: "The Content-Type of every object (default: from each file's extension).")
        var contentType: String?

        @Option(name: .long, help: "The Cache-Control of every object.")
        var cacheControl: String?

        @Option(name: .long, help: "Custom metadata KEY=VALUE; repeat for more.")
        var metadata: [String] = []

        @Flag(name: .long, help: "Print one JSON line per uploaded file and a summary line, nothing else.")
        var json = false

        @Argument(help: "Files to upload, then the destination.")
        var paths: [String] = []

        func validate() throws {
            guard paths.count >= 2 else { throw ValidationError("Give at least one file and a destination.") }
            guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1.") }
            for pair in metadata where !pair.contains("=") {
                throw ValidationError("--metadata takes KEY=VALUE, not '\(pair)'.")
            }
            if paths.count > 2, !(paths.last ?? "").hasSuffix("/") {
                throw ValidationError("Several files need a destination ending in '/'.")
            }
        }

        func run() async throws {
            let storage = self.storage.map(Storage.storage(url:)) ?? Storage.storage()
            let destination = paths.last!
            let files = paths.dropLast()
            let plan = files.map { file -> (file: String, object: String) in
                let object = destination.hasSuffix("/") || destination.isEmpty
                    ? destination + URL(fileURLWithPath: file).lastPathComponent : destination
                return (file, object)
            }
            let started = Date()
            var failures = 0
            var bytes: Int64 = 0
            await withTaskGroup(of: CopyOutcome.self) { group in
                var next = plan.makeIterator()
                func addNext() {
                    guard let item = next.next() else { return }
                    group.addTask { await Self.upload(item.file, to: storage.reference(withPath: item.object), metadata: makeMetadata()) }
                }
                for _ in 0..<concurrency { addNext() }
                for await outcome in group {
                    switch outcome.result {
                    case .success(let size):
                        bytes += size
                        if json { print(JSONLine.success(file: outcome.file, object: outcome.object, size: size)) }
                    case .failure(let error):
                        failures += 1
                        let code = StorageErrorCode(of: error)
                        if json {
                            print(JSONLine.failure(file: outcome.file, object: outcome.object, code: code, message: error.localizedDescription))
                        } else {
                            FileHandle.standardError.write(Data("hoist: \(outcome.file): \(code.name): \(error.localizedDescription)\n".utf8))
                        }
                    }
                    addNext()
                }
            }
            let summary = Summary(files: plan.count, failed: failures, bytes: bytes, seconds: Date().timeIntervalSince(started))
            if json { print(summary.json) } else if failures == 0 { print(summary.line) }
            if failures > 0 { throw ExitCode(1) }
        }

        private func makeMetadata() -> StorageMetadata {
            let result = StorageMetadata()
            result.contentType = contentType
            result.cacheControl = cacheControl
            if !metadata.isEmpty {
                result.customMetadata = Dictionary(metadata.map { pair in
                    let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    return (String(parts[0]), String(parts[1]))
                }, uniquingKeysWith: { _, last in last })
            }
            return result
        }

        private static func upload(_ file: String, to ref: StorageReference, metadata: StorageMetadata) async -> CopyOutcome {
            do {
                let stored = try await ref.putFileAsync(from: URL(fileURLWithPath: file), metadata: metadata)
                return CopyOutcome(file: file, object: ref.fullPath, result: .success(stored.size))
            } catch {
                return CopyOutcome(file: file, object: ref.fullPath, result: .failure(error as NSError))
            }
        }
    }
}

struct CopyOutcome: Sendable {
    let file: String
    let object: String
    let result: Result<Int64, NSError>
}
