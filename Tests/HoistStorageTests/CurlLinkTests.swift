import Foundation
import Testing
@testable import HoistStorage

@Suite struct CurlLinkTests {
    @Test func linksLibcurlAndFetchesAFileURL() throws {
        #expect(Curl.version.hasPrefix("libcurl/"))
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("hello.txt")
        try Data("hello from curl\n".utf8).write(to: file)
        let body = try Curl.get(file.absoluteString)
        #expect(String(decoding: body, as: UTF8.self) == "hello from curl\n")
    }

    @Test func reportsCurlErrors() {
        #expect(throws: CurlError.self) { try Curl.get("file:///nonexistent/hoist-\(UUID())") }
    }
}
