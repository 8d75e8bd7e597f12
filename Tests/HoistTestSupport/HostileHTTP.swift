import Foundation
import Synchronization

/// Tests/servers/hostilehttp.py: a server that answers each request with a hostile answer from
/// the corpus Tests/fuzz/corpus/http-answers.txt (or from `script`), with two traps that log
/// whatever reaches them: `trapHost` (127.0.0.2, another host) and `localTrap` (another port of
/// the server's host). `trapFolder` is where its file:// Locations point: nothing may appear there.
public final class HostileHTTPServer: Sendable {
    public let server: ServerProcess
    public let port: Int
    public let logFile: URL
    public let trapFolder: TemporaryDirectory
    public static let corpus = packageRoot.appendingPathComponent("Tests/fuzz/corpus/http-answers.txt")

    public enum Order: Sendable {
        /// These answers, in order, the last one again after them.
        case script([String])
        /// The corpus, line by line, round and round.
        case cycle
        /// Lines of the corpus picked by a generator seeded with this.
        case seed(UInt64)
    }

    public init(_ order: Order) throws {
        trapFolder = try TemporaryDirectory()
        logFile = trapFolder.url.deletingLastPathComponent().appendingPathComponent("hoist-hostile-\(UUID().uuidString).log")
        var arguments = [packageRoot.appendingPathComponent("Tests/servers/hostilehttp.py").path, "--answers", Self.corpus.path,
                         "--log", logFile.path, "--trap-dir", trapFolder.url.path]
        switch order {
        case .script(let lines): arguments += ["--script"] + lines
        case .cycle: arguments += ["--cycle"]
        case .seed(let seed): arguments += ["--seed", "\(seed)"]
        }
        server = try ServerProcess(testPython, testPythonArguments + arguments)
        port = try server.readyPort()
    }

    deinit { try? FileManager.default.removeItem(at: logFile) }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// The requests the server answered, in order: method, target, host, bearer (a Bool), answer.
    public var requests: [[String: Any]] { log.filter { $0["trap"] == nil && $0["traps"] == nil } }

    /// The traps' addresses (`HOST:PORT`): `trap` on another host, `localTrap` on another port of this one.
    public var trap: String { traps["trap"] ?? "" }
    public var localTrap: String { traps["localtrap"] ?? "" }
    private var traps: [String: String] { log.lazy.compactMap { $0["traps"] as? [String: String] }.first ?? [:] }

    /// What reached a trap: one entry per connection, with the first bytes it got (`first`).
    public var trapped: [[String: Any]] { log.filter { $0["trap"] != nil } }

    /// Files that appeared in `trapFolder`.
    public var filesWritten: [String] { (try? FileManager.default.contentsOfDirectory(atPath: trapFolder.url.path)) ?? [] }

    private var log: [[String: Any]] {
        let text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}

/// Runs `body`, and gives up on it after `seconds`: nil when it did not end in time (it is
/// cancelled then, and not waited for), else its result. For tests that must fail, not hang,
/// when Hoist hangs.
public func within<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async -> Result<T, any Error>? {
    let waiting = FirstAnswer<Result<T, any Error>?>()
    return await withCheckedContinuation { continuation in
        waiting.wait(continuation)
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            waiting.answer(result)
        }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            work.cancel()
            waiting.answer(nil)
        }
    }
}

/// A continuation resumed by the first of several answers.
private final class FirstAnswer<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, Never>?>(nil)
    func wait(_ waiting: CheckedContinuation<T, Never>) { continuation.withLock { $0 = waiting } }
    func answer(_ value: T) { continuation.withLock { $0.take() }?.resume(returning: value) }
}
