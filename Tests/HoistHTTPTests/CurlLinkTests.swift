import Foundation
import HoistHTTP
import HoistTestSupport
import Testing

@Suite struct CurlLinkTests {
    /// Every request speaks http(s) only, unless its caller widens `allowedProtocols` on
    /// purpose: a URL a server or a journal chose (a session URL) once made libcurl read and
    /// write `file:` paths. Here libcurl refuses a `file:` URL (CURLE_UNSUPPORTED_PROTOCOL), and
    /// reads it when a request allows `file` by name.
    @Test func linksLibcurlAndRefusesFileURLsUnlessAllowed() async throws {
        #expect(CurlEngine.version.hasPrefix("libcurl/"))
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("hello.txt")
        try Data("hello from curl\n".utf8).write(to: file)
        await #expect { try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: file.absoluteString)) } throws: { error in
            (error as? HTTPTransportError)?.code == 1
        }
        var allowed = HTTPRequest(method: "GET", url: file.absoluteString)
        allowed.allowedProtocols = "file"
        let response = try await CurlEngine.shared.perform(allowed)
        #expect(response.bodyText == "hello from curl\n")
    }

    /// Response headers as servers write them: names in any case, white space around values,
    /// an empty value, UTF-8 in a value; the headers of an interim `100 Continue` are not the answer's.
    @Test func headerNamesIgnoreCaseAndValuesAreTrimmed() async throws {
        let server = try Self.socketServer("""
            connection.sendall(b"HTTP/1.1 100 Continue\\r\\nX-Interim: 1\\r\\n\\r\\n"
                               b"HTTP/1.1 200 OK\\r\\nLOCATION: \\t http://example.test/a b \\t\\r\\n"
                               b"x-ODD-case:value\\r\\nX-Empty:\\r\\nX-Text:  caf\\xc3\\xa9  \\r\\n"
                               b"X-Dup: first\\r\\nx-dup: second\\r\\n"
                               b"Content-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
            connection.close()
            """)
        let port = try server.readyPort()
        let response = try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/"))
        #expect(response.status == 200 && response.bodyText == "ok")
        #expect(response.header("Location") == "http://example.test/a b")
        #expect(response.header("X-Odd-Case") == "value")
        #expect(response.header("x-empty") == "")
        #expect(response.header("X-TEXT") == "café")
        #expect(response.header("x-interim") == nil)
        // A name given twice: the last value, in the lookup and in the dictionary (lowercased names).
        #expect(response.header("X-DUP") == "second")
        #expect(response.headers["x-dup"] == "second" && response.headers["location"] == "http://example.test/a b")
        #expect(response.headers["x-interim"] == nil && response.headers.count == 7)
    }

    /// A task that prefers the engine as its executor runs on the engine's thread: its request's
    /// answer resumes it there, and so does a hop back from another executor, at once (the
    /// engine, waiting up to a second for sockets, is woken for it).
    @Test func tasksPreferringTheEngineRunOnItsThread() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("hello.txt")
        try Data("hello\n".utf8).write(to: file)
        let clock = ContinuousClock()
        let started = clock.now
        let (onEngine, names) = try await withTaskExecutorPreference(CurlEngine.shared) {
            var onEngine: [Bool] = [CurlEngine.shared.isCurrentThread]
            var names: Set<String> = [Self.threadName()]
            for _ in 0..<20 {
                var request = HTTPRequest(method: "GET", url: file.absoluteString)
                request.allowedProtocols = "file"
                let response = try await CurlEngine.shared.perform(request)
                #expect(response.bodyText == "hello\n")
                onEngine.append(CurlEngine.shared.isCurrentThread)
                await withTaskExecutorPreference(globalConcurrentExecutor) { #expect(!CurlEngine.shared.isCurrentThread) }
                onEngine.append(CurlEngine.shared.isCurrentThread)
                names.insert(Self.threadName())
            }
            return (onEngine, names)
        }
        #expect(onEngine.count == 41 && onEngine.allSatisfy { $0 }, "\(onEngine)")
        #expect(names == ["hoist.curl"])
        // 40 hops onto the engine; each would wait out the engine's one-second poll if not woken.
        #expect(clock.now - started < .seconds(5))
    }

    /// A kept connection stays in the engine's epoll set while idle (its next request then costs
    /// one EPOLL_CTL_MOD): when the server closes it there, the engine drops it from the set
    /// rather than wake for it on every turn, and the next request goes out on a new connection.
    @Test func aKeptConnectionClosedByTheServerWhileIdleIsDropped() async throws {
        let server = try Self.socketServer("""
            connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
            time.sleep(0.1)
            connection.close()   # kept alive by the client, closed here while it idles
            """)
        let port = try server.readyPort()
        let request = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/")
        #expect(try await CurlEngine.shared.perform(request).bodyText == "ok")
        let before = Self.processCPUSeconds()
        try await Task.sleep(for: .seconds(1))
        let spent = Self.processCPUSeconds() - before
        #expect(spent < 0.5, "\(spent) s of CPU in a second with nothing to do: the engine woke for the closed socket")
        #expect(try await CurlEngine.shared.perform(request).bodyText == "ok")
    }

    /// A server on loopback (Python) that accepts one connection at a time, reads the request,
    /// and runs `answer` (Python, with `connection` and `time`).
    private static func socketServer(_ answer: String) throws -> ServerProcess {
        let body = answer.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(separator: "\n")
        return try ServerProcess(testPython, testPythonArguments + ["-c", """
            import socket, time
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            print("ready", listener.getsockname()[1], flush=True)
            while True:
                connection, _ = listener.accept()
                connection.recv(65536)
            \(body)
            """])
    }

    private static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The name of the thread running the caller (as the kernel keeps it).
    private static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
    }

    @Test func reportsCurlErrors() async {
        await #expect(throws: HTTPTransportError.self) {
            try await CurlEngine.shared.perform(HTTPRequest(method: "GET", url: "file:///nonexistent/hoist-\(UUID())"))
        }
    }
}
