import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// A plan reads the journal alongside its walk (rows in byte order of their paths, a thousand
/// per query): the walk must come in that order, and every decision must be the one a lookup
/// per file would make.
@Suite struct JournalMergeTests {
    let hoist = productsDirectory.appendingPathComponent("hoist").path
    /// Names whose order differs between "sorted names" and "sorted full paths": a folder `a`
    /// holds paths `a/...`, which come after `a b`, `a-b` and `a.txt` in byte order.
    let names = ["a/x.txt", "a/y/z.txt", "a b.txt", "a-b/c.txt", "a.txt", "a0.txt", "ab/c.txt", "B.txt", "é.txt", "z.txt"]

    @Test func theWalkComesInTheByteOrderOfFullPaths() throws {
        let fixture = try JobFixture()
        for name in names { try fixture.file(name) }
        let walked = FileWalker(root: fixture.directory.url.appendingPathComponent("src").path).map(\.relativePath)
        #expect(walked == names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    @Test func decisionsReadAlongsideTheWalkAreTheOnesALookupWouldMake() throws {
        let fixture = try JobFixture()
        for name in names { try fixture.file(name, 100) }
        for index in 0..<2500 { try fixture.file("many/f\(index).txt", 10) }   // more than one chunk of rows
        // Two file sets over one root: each source has two rows, one per destination.
        _ = try fixture.job("""
            storage: { url: 'file:bucket' }
            files:
              - { root: src, destination: 'one/{relpath}' }
              - { root: src, destination: 'two/{relpath}' }
            """)
        let manifest = fixture.directory.url.appendingPathComponent("job.yaml").path
        #expect(try runProcess(hoist, ["run", manifest]).status == 0)

        // One file changes, one is new, one folder sorts between the others.
        try fixture.file("a-b/c.txt", 101)
        try fixture.file("a.new", 5)
        try fixture.file("many/f1000.txt", 11)
        let plan = try runProcess(hoist, ["plan", "--json", manifest])
        #expect(plan.status == 0, "\(plan.stderr)")
        var uploads: [String] = []
        var skips = 0
        for line in plan.stdout.split(separator: "\n") {
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            switch entry["action"] as? String {
            case "upload": uploads.append(String((entry["object"] as? String) ?? ""))
            case "skip":
                #expect(entry["reason"] as? String == "unchanged since the last upload", "\(entry)")
                skips += 1
            default: break
            }
        }
        #expect(uploads.sorted() == ["one/a-b/c.txt", "one/a.new", "one/many/f1000.txt", "two/a-b/c.txt", "two/a.new", "two/many/f1000.txt"])
        #expect(skips == 2 * (names.count + 2500) - 4)
    }
}
