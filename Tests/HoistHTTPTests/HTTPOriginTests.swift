import HoistHTTP
import Testing

/// `HTTPOrigin` decides where credentials and bytes may go (a session URL must be on the
/// endpoint's origin): it reads an http(s) URL's scheme, host and port strictly, and refuses
/// what a hostile server could smuggle in.
@Suite struct HTTPOriginTests {
    @Test func readsSchemeHostPortAndTarget() throws {
        let origin = try #require(HTTPOrigin("HTTPS://Storage.Example.com/upload/b/o?upload_id=1"))
        #expect(origin.description == "https://storage.example.com:443")
        #expect(origin.target == "/upload/b/o?upload_id=1")
        #expect(HTTPOrigin("http://127.0.0.1:9023")?.port == 9023)
        #expect(HTTPOrigin("http://[::1]:8080/x")?.host == "[::1]")
    }

    /// The default port is the one written out: same origin; another port, scheme or host is not.
    @Test func sameOriginComparesSchemeHostAndPort() {
        let endpoint = HTTPOrigin("https://storage.googleapis.com")
        #expect(HTTPOrigin("https://storage.googleapis.com:443/upload")?.sameOrigin(endpoint) == true)
        #expect(HTTPOrigin("http://storage.googleapis.com/upload")?.sameOrigin(endpoint) == false)
        #expect(HTTPOrigin("https://storage.googleapis.com:8443/upload")?.sameOrigin(endpoint) == false)
        #expect(HTTPOrigin("https://storage.googleapis.com.evil.example/")?.sameOrigin(endpoint) == false)
        #expect(HTTPOrigin("https://x/")?.sameOrigin(nil) == false)
    }

    /// A user or password, another scheme, a control character or space, a backslash, a bad
    /// port, an empty host: no origin at all.
    @Test(arguments: ["https://user:pw@host/", "https://host@evil/", "ftp://host/", "file:///etc/passwd", "https://ho st/",
                      "https://host/\u{0}", "https://host\\@evil/", "https://host:0/", "https://host:65536/", "https://host:x/",
                      "https:///path", "https://[::1/", "https://a:b:c/", "no-scheme"])
    func refusesWhatAServerCouldSmuggle(url: String) {
        #expect(HTTPOrigin(url) == nil, "\(url)")
    }
}
