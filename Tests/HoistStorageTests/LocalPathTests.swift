import Foundation
@testable import HoistStorage
import Testing

/// `putFile` reads the file at the standardized path of its URL; paths already standard skip
/// Foundation's standardizing (a job's paths always are). The result must be the same either way.
struct LocalPathTests {
    @Test func aPathIsTakenAsItIsOnlyWhenStandardizingWouldGiveItBack() throws {
        let fixed = ["/", "/a", "/a/b.txt", "/a/./b", "/a/../b", "/a//b", "/a/b/", "/.", "/..", "/a/.", "/a/..", "/.a/..b/...",
                     "/a/.hidden", "/a/b..", "/a/..b", "/a/b/c/../../d", "/é/ü .txt", "/a/%20b", "//a"]
        var generator = SystemRandomNumberGenerator()
        let parts = ["a", ".", "..", "", "...", ".b", "c.", "d e", "%41"]
        let random = (0..<2_000).map { _ in
            "/" + (0..<Int.random(in: 1...5, using: &generator)).map { _ in parts.randomElement(using: &generator)! }.joined(separator: "/")
        }
        for path in fixed + random {
            let url = URL(fileURLWithPath: path)
            #expect(try StorageUploadTask.localPath(of: url) == url.standardizedFileURL.path, "\(path)")
        }
        #expect(StorageUploadTask.isStandard("/a/b.txt") && StorageUploadTask.isStandard("/") && StorageUploadTask.isStandard("/a/...b"))
        for path in ["/a/./b", "/a/../b", "/a//b", "/a/", "/a/.", "/a/..", "a/b", ""] {
            #expect(!StorageUploadTask.isStandard(path), "\(path)")
        }
    }
}
