import Foundation
import HoistJobs
import HoistTestSupport
import HoistYAML
import Testing

@Suite struct PlannerTests {
    let storage = "storage: { url: 'file:bucket' }\n"

    @Test func walksInSortedOrderSkippingHiddenFiles() throws {
        let fixture = try JobFixture()
        for path in ["b.txt", "a/z.txt", "a/b/c.txt", "A.txt", ".hidden", ".git/config", "a/.DS_Store"] { try fixture.file(path) }
        let items = try fixture.plan(storage + "files: [{ root: src }]")
        #expect(items.map(\.file.relativePath) == ["A.txt", "a/b/c.txt", "a/z.txt", "b.txt"])
        let all = try fixture.plan(storage + "files: [{ root: src, hidden: true }]")
        #expect(all.map(\.file.relativePath) == [".git/config", ".hidden", "A.txt", "a/.DS_Store", "a/b/c.txt", "a/z.txt", "b.txt"])
    }

    /// A root may be one file (what `hoist cp FILE` plans): the set is that file, named by its name.
    @Test func aRootThatIsAFileIsThatOneFile() throws {
        let fixture = try JobFixture()
        try fixture.file("a/one.txt", 7)
        try fixture.file("a/two.txt")
        let items = try fixture.plan(storage + "files: [{ root: src/a/one.txt, destination: 'docs/{relpath}' }]")
        #expect(items.map(\.file.relativePath) == ["one.txt"])
        #expect(items.map(\.destination) == ["docs/one.txt"])
        #expect(items.first?.file.size == 7)
        #expect(try fixture.job(storage + "files: [{ root: src/a/one.txt }]").checkRoots().isEmpty)
    }

    /// A local bucket inside a root is never uploaded into itself (`hoist cp .` beside `.hoist/bucket`,
    /// or a job whose bucket lies in its root).
    @Test func theLocalBucketInsideARootIsNotWalked() throws {
        let fixture = try JobFixture()
        try fixture.file("page.html")
        try fixture.file("out/bucket/old.html")
        try fixture.file("out/other.html")
        let items = try fixture.plan("storage: { url: 'file:src/out/bucket' }\nfiles: [{ root: src }]")
        #expect(items.map(\.file.relativePath) == ["out/other.html", "page.html"])
    }

    @Test func symlinksAreSkippedUnlessFollowedAndLoopsAreCaught() throws {
        let fixture = try JobFixture()
        try fixture.file("real/one.txt")
        let src = fixture.directory.url.appendingPathComponent("src")
        try FileManager.default.createSymbolicLink(atPath: src.appendingPathComponent("link.txt").path, withDestinationPath: "real/one.txt")
        try FileManager.default.createSymbolicLink(atPath: src.appendingPathComponent("real/loop").path, withDestinationPath: "..")
        #expect(try fixture.plan(storage + "files: [{ root: src }]").map(\.file.relativePath) == ["real/one.txt"])
        let followed = try fixture.plan(storage + "files: [{ root: src, followSymlinks: true }]").map(\.file.relativePath)
        #expect(followed == ["link.txt", "real/one.txt"])
    }

    @Test func includeExcludeSizeAndAge() throws {
        let fixture = try JobFixture()
        try fixture.file("keep.jpg", 100)
        try fixture.file("small.jpg", 5)
        try fixture.file("huge.jpg", 5000)
        try fixture.file("doc.txt", 100)
        try fixture.file(".thumbs/t.jpg", 100)
        try fixture.file("x/.thumbs/t.jpg", 100)
        try fixture.file("fresh.jpg", 100, modified: Date())
        try fixture.file("old.jpg", 100, modified: Date(timeIntervalSinceNow: -3600))
        let items = try fixture.plan(storage + """
            files:
              - root: src
                hidden: true
                include: ["**/*.jpg"]
                exclude: ["**/.thumbs/**"]
                minSize: 10B
                maxSize: 1KB
                minAge: 10m
            """)
        let decisions = Dictionary(uniqueKeysWithValues: items.map { ($0.file.relativePath, $0.decision) })
        #expect(decisions["old.jpg"] == .upload)
        #expect(decisions["doc.txt"] == .skip(.notIncluded))
        #expect(decisions["small.jpg"] == .skip(.smallerThanMinSize))
        #expect(decisions["huge.jpg"] == .skip(.largerThanMaxSize))
        #expect(decisions[".thumbs/t.jpg"] == .skip(.excluded("**/.thumbs/**")))
        #expect(decisions["x/.thumbs/t.jpg"] == .skip(.excluded("**/.thumbs/**")))
        #expect(decisions["fresh.jpg"] == .skip(.newerThanMinAge))
        // keep.jpg was written just now too: also too fresh.
        #expect(decisions["keep.jpg"] == .skip(.newerThanMinAge))
    }

    @Test func destinationsAndMetadataRules() throws {
        let fixture = try JobFixture()
        try fixture.file("index.html", modified: Date(timeIntervalSince1970: 1_700_000_000))
        try fixture.file("css/site.css", modified: Date(timeIntervalSince1970: 1_700_000_000))
        let items = try fixture.plan(storage + """
            files:
              - root: src
                destination: "web/{dir}/{stem}.{ext}"
                metadata:
                  cacheControl: "public, max-age=60"
                  customMetadata: { job: "{job}", file: "{name}" }
                rules:
                  - match: "*.html"
                    metadata: { cacheControl: no-cache, contentLanguage: en }
                  - match: ["*.css", "*.js"]
                    metadata: { contentType: "text/css; charset=utf-8" }
            """)
        #expect(items.map(\.destination) == ["web/css/site.css", "web/index.html"])
        let css = items[0].attributes, html = items[1].attributes
        #expect(html.cacheControl == "no-cache")
        #expect(html.contentLanguage == "en")
        #expect(html.metadata == ["job": "test", "file": "index.html"])
        #expect(css.cacheControl == "public, max-age=60")
        #expect(css.contentType == "text/css; charset=utf-8")
    }

    @Test func collisionsAreAPlanErrorNamingBothFiles() throws {
        let fixture = try JobFixture()
        let a = try fixture.file("2023/pic.jpg")
        let b = try fixture.file("2024/pic.jpg")
        let job = try fixture.job(storage + "files: [{ root: src, destination: 'all/{name}' }]")
        #expect { try Planner(job: job).check() } throws: { error in
            "\(error)" == "\(a.path) and \(b.path) both go to 'all/pic.jpg': change the destination template"
        }
    }

    /// The same file reached through two file sets and sent to one object is one upload (one
    /// object, one journal row), not a collision; another file there still is one.
    @Test func theSameFileThroughTwoFileSetsToOneObjectIsOneUpload() throws {
        let fixture = try JobFixture()
        let pic = try fixture.file("a/pic.jpg")
        try fixture.file("a/other.jpg")
        let job = try fixture.job(storage + """
            files:
              - { root: src, destination: 'all/{name}' }
              - { root: src/a, destination: 'all/{name}' }
            """)
        var iterator = Planner(job: job).makeIterator()
        var items: [PlanItem] = []
        while let item = iterator.next() { items.append(item) }
        #expect(iterator.error == nil, "\(String(describing: iterator.error))")
        #expect(items.map(\.destination).sorted() == ["all/other.jpg", "all/pic.jpg"])
        #expect(items.filter { $0.file.path == pic.path }.count == 1)
    }

    /// A literal `..` is a manifest error at the destination (ManifestErrorTests); one that a
    /// placeholder's value makes stops the plan.
    @Test func templateThatLeavesItsPrefixStopsThePlan() throws {
        let fixture = try JobFixture()
        let file = try fixture.file("a.txt")
        let job = try fixture.job(storage + "files: [{ root: src, destination: '{env:UP}/{name}' }]", environment: ["HOME": "/root", "UP": ".."])
        #expect { try Planner(job: job).check() } throws: { error in
            "\(error)" == "\(file.path): destination '../a.txt' contains '..': a destination cannot leave its prefix"
        }
        #expect(throws: YAMLError.self) { try fixture.job(storage + "files: [{ root: src, destination: '../{name}' }]") }
    }

    @Test func countsForProgress() throws {
        let fixture = try JobFixture()
        try fixture.file("a", 100)
        try fixture.file("b", 250)
        try fixture.file("c.skip", 1)
        let totals = try Planner(job: try fixture.job(storage + "files: [{ root: src, exclude: '*.skip' }]")).check()
        #expect(totals.files == 2 && totals.bytes == 350)
    }
}
