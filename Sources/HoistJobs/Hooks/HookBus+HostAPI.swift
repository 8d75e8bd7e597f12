import Foundation
import HoistHTTP
import HoistLua
import HoistStorage

/// What hooks can call: `log`, `json`, `http`, `hoist`. Documented in docs/hooks.md.
extension HookBus {
    struct HostError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func installHostAPI() {
        let runtime = self.runtime
        let log = self.log
        let current = currentScript
        func logger(_ level: HookLogLine.Level) -> LuaValue {
            .function(LuaFunction { arguments in
                let text = arguments.map { $0.string ?? Self.jsonText($0) }.joined(separator: " ")
                log(HookLogLine(level: level, script: current.value, message: text))
                return []
            })
        }
        runtime.setGlobal("log", .table(["debug": logger(.debug), "info": logger(.info), "warn": logger(.warn), "error": logger(.error)]))
        runtime.setGlobal("print", logger(.info))
        // The job's environment as far as the manifest grants it (`HookEnvironment`).
        let environment = HookEnvironment(job: job)
        runtime.setField("os", "getenv", .function(LuaFunction { arguments in
            guard let name = arguments.first?.string, let value = environment.value(name) else { return [.nil] }
            return [.string(value)]
        }))

        runtime.setGlobal("json", .table([
            "encode": .function(LuaFunction { arguments in [.string(Self.jsonText(arguments.first ?? .nil))] }),
            // A copy of a list, marked so that it encodes as a JSON array even when empty.
            "array": .function(LuaFunction { arguments in
                switch arguments.first ?? .nil {
                case .nil: return [.array([])]
                case .array(let items): return [.array(items)]
                case .table(let fields) where fields.isEmpty: return [.array([])]
                default: throw HostError("json.array needs a list (a table with keys 1..n)")
                }
            }),
            // Built within the memory the hooks have left, counted as it goes.
            "decode": .function(LuaFunction { [unowned runtime] arguments in
                guard let text = arguments.first?.string else { throw HostError("json.decode needs a string") }
                let limit = runtime.limits.memory
                let left = limit > 0 ? max(0, limit - runtime.memoryInUse) : .max
                do { return [try HookJSONDecoder.decode(text, allowance: left, limit: limit)] } catch { throw HostError("\(error)") }
            }),
        ]))

        installHTTP()

        let output = appendTarget
        let controls = self.controls
        runtime.setGlobal("hoist", .table([
            "job": .table(["name": .string(job.manifest.name), "run_id": .string(runID),
                           "started": .integer(Int64(started.timeIntervalSince1970))]),
            "pause_job": .function(LuaFunction { _ in controls.pause(); return [] }),
            "resume_job": .function(LuaFunction { _ in controls.resume(); return [] }),
            "append_file": .function(LuaFunction { arguments in
                guard arguments.count >= 2, let path = arguments[0].string, let text = arguments[1].string else {
                    throw HostError("hoist.append_file(path, text) needs a path and a text")
                }
                try output.append(Data(text.utf8), to: path)
                return []
            }),
        ]))
    }

    /// `http.post(url, body, headers)`: a POST over http(s) through the job's transport,
    /// bounded in time and size, trusting the CA bundle the storage trusts.
    private func installHTTP() {
        let runtime = self.runtime
        let requests = self.requests, transport = self.transport
        // The CA bundle the job trusts for storage (`--ca-bundle`, `storage.caBundle`, the
        // environment) also serves notifications: a re-signing proxy signs every host.
        let caBundle = storage.backend.capabilities.caBundle ?? HTTPRequest.caBundle(fromEnvironment: job.environment)
        runtime.setGlobal("http", .table([
            "post": .function(LuaFunction { [unowned runtime] arguments in
                guard let url = arguments.first?.string else { throw HostError("http.post needs a URL") }
                guard let scheme = url.split(separator: ":", maxSplits: 1).first?.lowercased(), url.contains(":"),
                      scheme == "http" || scheme == "https" else {
                    throw HostError("http.post: only http:// and https:// URLs are allowed, not '\(url.prefix(40))'")
                }
                var request = HTTPRequest(method: "POST", url: url)
                request.body = [.data(Data((arguments.count > 1 ? arguments[1].string ?? "" : "").utf8))]
                if arguments.count > 2, case .table(let headers) = arguments[2] {
                    request.headers = try headers.sorted { $0.key < $1.key }.compactMap { key, value in
                        guard let text = value.string else { return nil }
                        guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
                            throw HostError("http.post: bad header name '\(key.prefix(40))'")
                        }
                        if let problem = headerValueProblem(text) { throw HostError("http.post: header \(key) \(problem)") }
                        return (key, text)
                    }
                }
                let left = runtime.secondsLeft ?? Self.httpTimeout
                request.allowedProtocols = "http,https"
                request.caBundle = caBundle
                request.maxResponseBytes = Self.maxResponseBytes
                request.totalTimeout = max(0.001, min(Self.httpTimeout, left))
                request.connectTimeout = min(5, request.totalTimeout!)
                request.stallTimeout = 10
                let prepared = request
                let outcome: Result<HTTPResponse, any Error>? = requests.wait {
                    do { return .success(try await transport.perform(prepared)) } catch { return .failure(error) }
                }
                switch outcome {
                case .success(let response)?:
                    return [.table(["status": .integer(Int64(response.status)), "body": .string(response.bodyText)])]
                case .failure(let error)?:
                    return [.nil, .string(error is CancellationError ? "stopped: the job is stopping" : "\(error)")]
                case nil:
                    return [.nil, .string("stopped: the job is stopping")]
                }
            }),
        ]))
    }

    /// `http.post` gives up after this many seconds (or the call's time limit, if sooner).
    static let httpTimeout = 10.0
    /// `http.post` refuses a response body longer than this.
    static let maxResponseBytes = 1 << 20

    /// Whether an environment variable is named like credentials: a key of the manifest's `env:`
    /// so named is hidden from `os.getenv` unless `lua.env` grants it, and so is a URL's query
    /// parameter or a connection string's word (`redactingCredentials`). Google's and other clouds' variables, and any name that says
    /// token, secret, password, credential, private or key.
    static func isSecret(_ name: String) -> Bool {
        let upper = name.uppercased()
        if ["GOOGLE_", "GCLOUD", "CLOUDSDK_", "AWS_", "AZURE_", "GITHUB_", "GH_"].contains(where: upper.hasPrefix) { return true }
        if ["TOKEN", "SECRET", "PASS", "CREDENTIAL", "PRIVATE", "APIKEY", "API_KEY", "ACCESS_KEY", "AUTH", "WEBHOOK", "DSN", "COOKIE"]
            .contains(where: upper.contains) { return true }
        return upper.hasSuffix("_KEY") || upper == "KEY" || upper.hasSuffix("_PWD")
    }

    /// `value` with the credentials of every URL in it hidden, whatever the variable's name
    /// (`HOIST_JOURNAL`, `HTTPS_PROXY`, `DATABASE_URL`...): a userinfo's password
    /// (`postgres://u:***@host/db`), a userinfo without one whole (`https://***@host`: such a
    /// name is often a token), and the value of query parameters named like credentials
    /// (`?sslpassword=***`, and `password=***` as a word of a keyword connection string). A
    /// scheme-less `user:password@host` loses its password too; an e-mail address (no `:` before
    /// its `@`) stays as it is. A JSON member named like a credential loses its value
    /// (`{"db_password": "***"}`).
    static func redactingCredentials(_ value: String) -> String {
        let value = redactingKeywordCredentials(redactingJSONCredentials(value))
        guard value.contains("@") || value.contains("=") else { return value }
        var result = ""
        var token = ""
        for character in value {
            if character.isWhitespace || ",;\"'<>".contains(character) {
                result += redactingURLCredentials(token)
                result.append(character)
                token = ""
            } else {
                token.append(character)
            }
        }
        return result + redactingURLCredentials(token)
    }

    /// `text` with the value of each JSON member named like a credential hidden: a config held
    /// in a variable (`{"db_host": "db", "db_password": "***"}`).
    private static func redactingJSONCredentials(_ text: String) -> String {
        guard text.contains("\"") else { return text }
        return text.replacing(/("((?:[^"\\]|\\.)*)"\s*:\s*)("(?:[^"\\]|\\.)*"|[^,{}\[\]\s]+)/) { match in
            isSecret(String(match.2)) ? String(match.1) + "\"***\"" : String(match.0)
        }
    }

    /// `text` with the value of each `name=value` or `name: value` whose name is a credential's
    /// hidden, spaces around the sign and quotes allowed (libpq's `password = 'x'`, a header's
    /// `Authorization: Bearer x`).
    private static func redactingKeywordCredentials(_ text: String) -> String {
        guard text.contains("=") || text.contains(":") else { return text }
        return text.replacing(/([A-Za-z_][A-Za-z0-9_.\-]*)(\s*[=:]\s*)((?:(?i:bearer|basic|token|digest)\s+)?(?:'[^']*'|"[^"]*"|[^\s,;&'"]+))/) { match in
            isSecret(String(match.1)) && !match.3.hasPrefix("//") ? String(match.1) + String(match.2) + "***" : String(match.0)
        }
    }

    /// One URL-like word with its credentials hidden (see `redactingCredentials`).
    private static func redactingURLCredentials(_ word: String) -> String {
        // A keyword connection string's word (libpq's `host=db password=...`).
        if !word.contains("://"), let equals = word.firstIndex(of: "="), isSecret(String(word[..<equals])) { return String(word[...equals]) + "***" }
        var rest = Substring(word)
        var scheme = ""
        if let separator = rest.range(of: "://") {
            scheme = String(rest[..<separator.upperBound])
            rest = rest[separator.upperBound...]
        }
        let authorityEnd = rest.firstIndex(where: { "/?#".contains($0) }) ?? rest.endIndex
        var authority = String(rest[..<authorityEnd])
        var tail = String(rest[authorityEnd...])
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            if let colon = userinfo.firstIndex(of: ":") {
                authority = String(userinfo[...colon]) + "***" + String(authority[at...])
            } else if !scheme.isEmpty {
                authority = "***" + String(authority[at...])
            }
        }
        if let query = tail.firstIndex(of: "?") {
            let end = tail[query...].firstIndex(of: "#") ?? tail.endIndex
            let parameters = tail[tail.index(after: query)..<end].split(separator: "&", omittingEmptySubsequences: false).map { pair in
                guard let equals = pair.firstIndex(of: "="), isSecret(String(pair[..<equals])) else { return String(pair) }
                return String(pair[...equals]) + "***"
            }
            tail = String(tail[...query]) + parameters.joined(separator: "&") + String(tail[end...])
        }
        return scheme + authority + tail
    }

    static func jsonText(_ value: LuaValue) -> String {
        let object = jsonObject(value)
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    static func jsonObject(_ value: LuaValue) -> Any {
        switch value {
        case .nil, .function: NSNull()
        case .boolean(let flag): flag
        case .integer(let number): number
        case .number(let number): number.isFinite ? number : NSNull()
        case .string(let text): text
        case .array(let items): items.map(jsonObject)
        case .table(let fields): fields.mapValues(jsonObject)
        }
    }
}
