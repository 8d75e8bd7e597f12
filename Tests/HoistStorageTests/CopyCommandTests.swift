import Foundation
import Testing

/// `hoist cp` as a user runs it: objects in the bucket, output lines and exit statuses.
@Suite struct CopyCommandTests {
    let hoist = productsDirectory.appendingPathComponent("hoist").path

    @Test func filesUnderAPrefixWithMetadataFlags() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("src/a.txt", Data("alpha".utf8))
        let b = try directory.write("src/b.html", Data("<b>".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, [
            "cp", "--storage", "file://" + bucket.path, "--cache-control", "no-cache", "--metadata", "team=web",
            "--metadata", "run=3", a.path, b.path, "site/",
        ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("2 of 2 files uploaded, 8 bytes"))
        #expect(try Data(contentsOf: bucket.appendingPathComponent("site/a.txt")) == Data("alpha".utf8))
        let meta = try JSONSerialization.jsonObject(
            with: Data(contentsOf: bucket.appendingPathComponent(".hoist/meta/site/b.html.json"))) as? [String: Any]
        #expect(meta?["contentType"] as? String == "text/html")
        #expect(meta?["cacheControl"] as? String == "no-cache")
        #expect(meta?["metadata"] as? [String: String] == ["team": "web", "run": "3"])
    }

    @Test func oneFileToAnExactName() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("a.txt", Data("alpha".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let run = try runProcess(hoist, ["cp", "--json", "--storage", "file://" + bucket.path, a.path, "renamed/x.bin"])
        #expect(run.status == 0)
        let first = try JSONSerialization.jsonObject(with: Data(run.stdout.split(separator: "\n")[0].utf8)) as? [String: Any]
        #expect(first?["event"] as? String == "success")
        #expect(first?["object"] as? String == "renamed/x.bin")
        #expect(first?["size"] as? Int == 5)
        #expect(try Data(contentsOf: bucket.appendingPathComponent("renamed/x.bin")) == Data("alpha".utf8))
    }

    @Test func someFailedExitsOne() throws {
        let directory = try TemporaryDirectory()
        let a = try directory.write("a.txt", Data("alpha".utf8))
        let bucket = directory.url.appendingPathComponent("bucket")
        let missing = directory.url.appendingPathComponent("missing.txt").path
        let run = try runProcess(hoist, ["cp", "--storage", "file://" + bucket.path, a.path, missing, "p/"])
        #expect(run.status == 1)
        #expect(run.stderr == "hoist: \(missing): objectNotFound: File \(missing) does not exist.\n")
        #expect(FileManager.default.fileExists(atPath: bucket.appendingPathComponent("p/a.txt").path))
    }

    @Test(arguments: [["cp", "only-one"], ["cp", "--bogus", "a", "b"], ["cp", "a", "b", "no-slash"], ["cp", "-j", "0", "a", "b/"]])
    func badUsageExitsTwo(arguments: [String]) throws {
        let run = try runProcess(hoist, arguments)
        #expect(run.status == 2)
        #expect(run.stderr.hasPrefix("Error: "))
    }
}
