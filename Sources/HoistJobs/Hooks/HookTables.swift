import Foundation
import HoistLua
import HoistStorage

/// What hooks see and answer, as Lua tables: snapshots, metadata, `before_upload`'s answer.
enum HookTables {
    static func snapshot(_ snapshot: StorageTaskSnapshot, item: PlanItem) -> [String: LuaValue] {
        let completed = snapshot.completed
        let total = snapshot.total
        var table: [String: LuaValue] = [
            "status": .string(snapshot.status.name),
            "reference": .table(["bucket": .string(snapshot.reference.bucket), "fullPath": .string(snapshot.reference.fullPath),
                                 "name": .string(snapshot.reference.name)]),
            "progress": .table(["completed": .integer(completed), "total": .integer(total),
                                "fraction": .number(total > 0 ? Double(completed) / Double(total) : 1)]),
            "file": .table(["path": .string(item.file.path), "relpath": .string(item.file.relativePath),
                            "size": .integer(item.file.size), "mtime": .integer(Int64(item.file.modified.timeIntervalSince1970))]),
        ]
        if let stored = snapshot.metadata { table["metadata"] = Self.metadata(stored.resource) }
        if let (code, message) = snapshot.failure {
            table["error"] = .table(["code": .string(code.name), "rawValue": .integer(Int64(code.rawValue)),
                                     "message": .string(redactingQueries(message))])
        }
        return table
    }

    static func metadata(_ resource: ObjectResource) -> LuaValue {
        var fields: [String: LuaValue] = [:]
        func put(_ key: String, _ value: String?) { if let value { fields[key] = .string(value) } }
        put("bucket", resource.bucket)
        put("name", resource.name.map { String($0.split(separator: "/").last ?? "") })
        put("fullPath", resource.name)
        for field in ObjectResource.headerFields { put(field.name, resource[keyPath: field.keyPath]) }
        put("md5Hash", resource.md5Hash)
        put("crc32c", resource.crc32c)
        if let size = resource.size { fields["size"] = .integer(size) }
        if let generation = resource.generation { fields["generation"] = .integer(generation) }
        if let created = resource.timeCreated { fields["timeCreated"] = .string(created.formatted(.iso8601)) }
        if let updated = resource.updated { fields["updated"] = .string(updated.formatted(.iso8601)) }
        fields["customMetadata"] = .table((resource.metadata ?? [:]).mapValues { .string($0) })
        return .table(fields)
    }

    /// The item `before_upload` answered for: `false` skips it; a table may change its
    /// destination (normalized, never leaving the prefix) and metadata (header values checked).
    static func apply(_ answer: LuaValue, to item: PlanItem) throws(HookError) -> PlanItem {
        var changed = item
        switch answer {
        case .boolean(false):
            changed.decision = .skip(.vetoed)
        case .table(let fields):
            var destination = item.destination
            var attributes = item.attributes
            if let value = fields["destination"], value != .nil {
                guard let text = value.string else { throw HookError(description: "before_upload: destination must be a string") }
                do { destination = try normalizedObjectPath(text) } catch {
                    throw HookError(description: "before_upload gave a bad destination: \(error.message)")
                }
            }
            if case .table(let metadata) = fields["metadata"] ?? .nil {
                for (key, value) in metadata {
                    let text = value.string
                    if let text, let problem = headerValueProblem(text) {
                        throw HookError(description: "before_upload: metadata \(key) \(problem)")
                    }
                    if let field = ObjectResource.headerFields.first(where: { $0.name == key }) {
                        attributes[keyPath: field.keyPath] = text
                        continue
                    }
                    switch key {
                    case "customMetadata":
                        if case .table(let custom) = value {
                            var merged = attributes.metadata ?? [:]
                            for (k, v) in custom {
                                if let problem = headerValueProblem(k) ?? v.string.flatMap(headerValueProblem) {
                                    throw HookError(description: "before_upload: customMetadata \(k) \(problem)")
                                }
                                merged[k] = v.string
                            }
                            attributes.metadata = merged
                        }
                    default: break
                    }
                }
            }
            if destination != item.destination || attributes != item.attributes {
                changed = PlanItem(file: item.file, destination: destination, attributes: attributes, decision: item.decision,
                                   fileSetIndex: item.fileSetIndex, resumeSession: item.resumeSession)
                changed.mayBeStored = item.mayBeStored
            }
        default:
            break
        }
        return changed
    }
}

/// `text` with the query of every URL in it cut (`https://host/path?…`): a resumable upload's
/// session URL carries `upload_id`, which lets whoever holds it write the object, and error
/// messages name the URL that failed. Hooks see messages without it.
func redactingQueries(_ text: String) -> String {
    guard text.contains("://"), text.contains("?") else { return text }
    var result = ""
    var inURL = false
    var cutting = false
    var index = text.startIndex
    while index < text.endIndex {
        let character = text[index]
        if character.isWhitespace || character == "\"" || character == "'" || character == ")" {
            inURL = false
            cutting = false
        } else if !inURL, text[index...].hasPrefix("http://") || text[index...].hasPrefix("https://") {
            inURL = true
        } else if inURL, character == "?", !cutting {
            cutting = true
            result += "?…"
        }
        if !cutting { result.append(character) }
        index = text.index(after: index)
    }
    return result
}
