import Foundation
import HoistHTTP
import HoistTestSupport
import Testing
@testable import HoistStorage

@Suite struct CurlLinkTests {
    @Test func linksLibcurlAndFetchesAFileURL() async throws {
        #expect(CurlEngine.version.hasPrefix("libcurl/"))
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("hello.txt")
        try Data("hello from curl\n".utf8).write(to: file)
        let response = try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: file.absoluteString))
        #expect(response.bodyText == "hello from curl\n")
    }

    @Test func reportsCurlErrors() async {
        await #expect(throws: HTTPTransportError.self) {
            try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: "file:///nonexistent/hoist-\(UUID())"))
        }
    }
}
