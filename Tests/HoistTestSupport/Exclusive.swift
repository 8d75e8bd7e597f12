/// Runs timing-sensitive and disk-heavy tests one at a time, whatever suite they are in:
/// a 1 GiB upload beside a bandwidth measurement would make the measurement about the disk.
public actor ExclusiveTests {
    public static let shared = ExclusiveTests()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        if busy {
            await withCheckedContinuation { waiters.append($0) }
        }
        busy = true
        defer {
            if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
        }
        return try await body()
    }
}
