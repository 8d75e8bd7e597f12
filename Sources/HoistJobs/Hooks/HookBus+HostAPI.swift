import Foundation
import HoistLua
import HoistStorage

/// What hooks can call: `log`, `json`, `http`, `hoist`. Documented in docs/hooks.md.
extension HookBus {
    struct HostError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func installHostAPI() {
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
        // The job's environment: the same one its manifest's ${VAR} read.
        let environment = job.environment
        runtime.setField("os", "getenv", .function(LuaFunction { arguments in
            [arguments.first?.string.flatMap { environment[$0] }.map(LuaValue.string) ?? .nil]
        }))

        runtime.setGlobal("json", .table([
            "encode": .function(LuaFunction { arguments in [.string(Self.jsonText(arguments.first ?? .nil))] }),
            "decode": .function(LuaFunction { arguments in
                guard let text = arguments.first?.string else { throw HostError("json.decode needs a string") }
                guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]) else {
                    throw HostError("json.decode: not valid JSON")
                }
                return [Self.luaValue(object)]
            }),
        ]))

        runtime.setGlobal("http", .table([
            "post": .function(LuaFunction { arguments in
                guard let url = arguments.first?.string else { throw HostError("http.post needs a URL") }
                var request = HTTPRequest(method: "POST", url: url)
                request.body = [.data(Data((arguments.count > 1 ? arguments[1].string ?? "" : "").utf8))]
                if arguments.count > 2, case .table(let headers) = arguments[2] {
                    request.headers = headers.sorted { $0.key < $1.key }.compactMap { key, value in value.string.map { (key, $0) } }
                }
                request.connectTimeout = 5
                request.stallTimeout = 10
                let prepared = request
                let outcome: Result<HTTPResponse, any Error>? = blocking {
                    do { return .success(try await CurlEngine.shared.perform(prepared)) } catch { return .failure(error) }
                }
                switch outcome {
                case .success(let response)?:
                    return [.table(["status": .integer(Int64(response.status)), "body": .string(response.bodyText)])]
                case .failure(let error)?:
                    return [.nil, .string("\(error)")]
                case nil:
                    return [.nil, .string("request failed")]
                }
            }),
        ]))

        let directory = job.directory
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
                let relative: String
                do { relative = try normalizedObjectPath(path) } catch {
                    throw HostError("hoist.append_file: '\(path)' must stay inside the job's folder")
                }
                guard !path.hasPrefix("/") else { throw HostError("hoist.append_file: '\(path)' must be relative to the job's folder") }
                let url = directory.appendingPathComponent(relative)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                if !FileManager.default.fileExists(atPath: url.path) { _ = FileManager.default.createFile(atPath: url.path, contents: nil) }
                guard let handle = FileHandle(forWritingAtPath: url.path) else { throw HostError("hoist.append_file: cannot write \(path)") }
                defer { try? handle.close() }
                handle.seekToEndOfFile()
                handle.write(Data(text.utf8))
                return []
            }),
        ]))
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

    static func luaValue(_ object: Any) -> LuaValue {
        switch object {
        case let number as NSNumber:
            if String(cString: number.objCType) == "c" { return .boolean(number.boolValue) }
            if let exact = Int64(exactly: number.doubleValue), !String(cString: number.objCType).contains("d") { return .integer(exact) }
            if number.doubleValue == number.doubleValue.rounded(), let exact = Int64(exactly: number.doubleValue) { return .integer(exact) }
            return .number(number.doubleValue)
        case let text as String: return .string(text)
        case let items as [Any]: return .array(items.map(luaValue))
        case let fields as [String: Any]: return .table(fields.mapValues(luaValue))
        default: return .nil
        }
    }
}
