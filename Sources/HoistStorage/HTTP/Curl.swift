import Foundation
private import CCurl

/// libcurl, seen from Swift. Only this file imports libcurl; the HTTP engine of the `gs://`
/// backend grows here.
enum Curl {
    /// Sets up libcurl once per process (curl_global_init is not thread-safe).
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// libcurl's version line, such as `libcurl/7.88.1 OpenSSL/3.0.17 ...`.
    static var version: String {
        _ = initialized
        return String(cString: curl_version())
    }

    /// Fetches `url` with one easy handle and returns the body.
    /// - Throws: `CurlError` with curl's message, or the HTTP status when it is 400 or more.
    static func get(_ url: String, timeout seconds: Int = 30) throws -> Data {
        _ = initialized
        let handle = EasyHandle()
        try handle.set(CURLOPT_URL, url)
        try handle.set(CURLOPT_TIMEOUT, seconds)
        try handle.set(CURLOPT_FOLLOWLOCATION, 1)
        return try handle.performCollectingBody()
    }

    /// One `CURL *`, freed with its owner.
    private final class EasyHandle {
        let raw: UnsafeMutableRawPointer
        private var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE))

        init() { raw = curl_easy_init()! }
        deinit { curl_easy_cleanup(raw) }

        func set(_ option: CURLoption, _ value: String) throws {
            try check(hoist_curl_easy_setopt_string(raw, option, value))
        }

        func set(_ option: CURLoption, _ value: Int) throws {
            try check(hoist_curl_easy_setopt_long(raw, option, value))
        }

        func performCollectingBody() throws -> Data {
            final class Sink { var data = Data() }
            let sink = Sink()
            let write: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
                bytes, size, count, context in
                let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
                if let bytes { sink.data.append(UnsafeRawPointer(bytes).assumingMemoryBound(to: UInt8.self), count: size * count) }
                return size * count
            }
            let context = Unmanaged.passUnretained(sink).toOpaque()
            let handle = raw
            try check(hoist_curl_easy_setopt_write(handle, write))
            try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
            try errorBuffer.withUnsafeMutableBufferPointer { buffer in
                try check(hoist_curl_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, buffer.baseAddress))
                let code = withExtendedLifetime(sink) { curl_easy_perform(handle) }
                if code != CURLE_OK {
                    let detail = String(cString: buffer.baseAddress!)
                    throw CurlError(code: Int(code.rawValue),
                                    message: detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
                }
            }
            var status = 0
            _ = hoist_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            if status >= 400 { throw CurlError(code: -status, message: "HTTP \(status)") }
            return sink.data
        }

        private func check(_ code: CURLcode) throws {
            if code != CURLE_OK { throw CurlError(code: Int(code.rawValue), message: String(cString: curl_easy_strerror(code))) }
        }
    }
}

/// A libcurl failure: curl's code (negative for an HTTP status) and message.
struct CurlError: Error, CustomStringConvertible {
    let code: Int
    let message: String
    var description: String { "curl: \(message)" }
}
