import Foundation
import HoistTestSupport
import Testing

/// `hoist run --json` and `hoist cp --json` print the events docs/events.md describes: every line
/// of real runs (uploads, a skip, a failure) is checked against schema/events.schema.json.
@Suite struct EventSchemaTests {
    @Test func runAndCopyPrintEventsOfOneSchema() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt", 100)
        try fixture.file("b/c.txt", 200)
        try fixture.file("x", 10)
        // An object `x` cannot be stored where the bucket holds a folder `x/`: that file fails.
        try fixture.directory.write("bucket/x/inside", Data("y".utf8))
        _ = try fixture.job("storage: { url: 'file:bucket' }\nfiles: [{ root: src }]\n")
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        let first = try runProcess(hoist, ["run", "--json", manifest])
        #expect(first.status == 1, "\(first.stderr)")
        let events = try validateEvents(first.stdout)
        #expect(events.first == "job_start" && events.last == "job_end")
        #expect(events.filter { $0 == "success" }.count == 2)
        #expect(events.filter { $0 == "failure" }.count == 1)
        #expect(events.contains("plan_counted"))

        let second = try runProcess(hoist, ["run", "--json", manifest])
        #expect(try validateEvents(second.stdout).filter { $0 == "skip" }.count == 2)

        let src = fixture.directory.url.appendingPathComponent("src").path
        let bucket = "file://" + fixture.directory.url.appendingPathComponent("copies").path
        let copy = try runProcess(hoist, ["cp", "--json", "--storage", bucket, "--exclude", "x", src, "c/"])
        #expect(copy.status == 0, "\(copy.stderr)")
        let copied = try validateEvents(copy.stdout)
        #expect(copied.first == "job_start" && copied.last == "job_end")
        #expect(copied.filter { $0 == "success" }.count == 2 && copied.filter { $0 == "skip" }.count == 1)
    }
}
