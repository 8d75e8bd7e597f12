import Dispatch
import Foundation
import Synchronization

/// A small pool of threads for an upload's CPU work (reading, hashing, compressing), apart from
/// the HTTP engine's thread, which then only moves bytes, and from Swift's cooperative pool,
/// which the run's other tasks (hooks, the journal's batches) share: `shared` (one per core)
/// reads large request bodies ahead of their connections (`ReadAhead`), a job runner's own
/// (`upload.cpu`) compresses files. Threads start at the first job and end when the pool is
/// released. Jobs run in the order given; a job never waits on another.
public final class CPUWorkers: Sendable {
    /// How many threads run jobs at once.
    public let count: Int
    private let queue: JobQueue

    /// The process's pool, one thread per core: request bodies read ahead (`ReadAhead`).
    public static let shared = CPUWorkers()

    /// The machine's cores (as the process may use them).
    public static var cores: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }

    /// A pool of `count` threads (at least one), named `hoist.cpu` for `top -H` and `perf`.
    public init(count: Int = CPUWorkers.cores) {
        self.count = max(1, count)
        queue = JobQueue(threads: self.count)
    }

    deinit { queue.close() }

    /// Runs `work` on one of the pool's threads and returns its result; the caller's thread is
    /// not held meanwhile.
    public func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.push { continuation.resume(returning: work()) }
        }
    }

    /// Runs `work` on one of the pool's threads, later; nothing waits for it.
    public func start(_ work: @escaping @Sendable () -> Void) {
        queue.push(work)
    }
}

/// The jobs waiting for a thread, and the threads (started as the first job comes).
private final class JobQueue: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var started = false
        var closed = false
    }
    private let state = Mutex(State())
    /// One signal per job pushed (and one per thread when closing).
    private let ready = DispatchSemaphore(value: 0)
    private let threads: Int

    init(threads: Int) { self.threads = threads }

    func push(_ job: @escaping @Sendable () -> Void) {
        let start = state.withLock { state -> Bool in
            state.jobs.append(job)
            defer { state.started = true }
            return !state.started
        }
        if start {
            for _ in 0..<threads {
                Thread { [self] in
                    // The kernel's name, as `top -H` shows it (Foundation's `Thread.name` does not
                    // always reach it; glibc's `pthread_setname_np` is not imported).
                    try? "hoist.cpu".write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
                    self.work()
                }.start()
            }
        }
        ready.signal()
    }

    func close() {
        let started = state.withLock { state -> Bool in
            state.closed = true
            return state.started
        }
        if started { for _ in 0..<threads { ready.signal() } }
    }

    private func work() {
        while true {
            ready.wait()
            let job = state.withLock { state -> (@Sendable () -> Void)? in
                guard state.head < state.jobs.count else { return nil }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head >= 64, state.head * 2 >= state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return job
            }
            guard let job else {
                if state.withLock({ $0.closed }) { return }
                continue
            }
            job()
        }
    }
}
