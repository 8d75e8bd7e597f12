import Foundation
@testable import HoistJobs
@testable import HoistStorage
import HoistTestSupport
import Testing

/// One source of truth for manifest keys: the decoder's own (each type's `CodingKeys`, and the
/// `storage:` keys of every built-in backend's options). `schema/job.schema.json` and the key
/// tables of docs/manifest.md list exactly those, section by section: a key missing from
/// either side fails, named.
@Suite struct ManifestKeyTests {
    struct Section: Sendable, CustomTestStringConvertible {
        let name: String
        /// The decoder's keys.
        let keys: Set<String>
        /// Where its properties are in the schema (each path's `properties` merged).
        let schema: [[String]]
        /// The heading over its key table in docs/manifest.md, or nil where the keys are named in prose.
        let docs: String?
        var testDescription: String { name }
    }

    static let sections: [Section] = [
        Section(name: "top level", keys: names(JobManifest.CodingKeys.self), schema: [[]], docs: "## Top level"),
        Section(name: "storage", keys: names(StorageSettings.CodingKeys.self).union(BackendRegistry.builtIn.flatMap { $0.options.keys }),
                schema: [["properties", "storage"]], docs: "## `storage`"),
        Section(name: "files[]", keys: names(FileSet.CodingKeys.self), schema: [["$defs", "fileSet"]], docs: "## `files[]`: file sets"),
        Section(name: "metadata", keys: names(MetadataSettings.CodingKeys.self), schema: [["$defs", "metadata"]], docs: "### `metadata`"),
        Section(name: "rules[]", keys: names(MetadataRule.CodingKeys.self), schema: [["$defs", "fileSet", "properties", "rules", "items"]],
                docs: nil),
        Section(name: "compress", keys: names(Compression.CodingKeys.self),
                schema: [["$defs", "fileSet", "properties", "compress", "oneOf", "1"]], docs: nil),
        Section(name: "upload", keys: names(UploadSettings.CodingKeys.self), schema: [["properties", "upload"]], docs: "## `upload`"),
        Section(name: "lua", keys: names(LuaSettings.CodingKeys.self), schema: [["properties", "lua"]], docs: nil),
        Section(name: "watch", keys: names(WatchSettings.CodingKeys.self), schema: [["properties", "watch"]], docs: "## `watch`"),
        Section(name: "hooks[]", keys: names(HookSource.CodingKeys.self),
                schema: [["properties", "hooks", "items", "oneOf", "1"], ["properties", "hooks", "items", "oneOf", "2"]], docs: nil),
    ]

    static func names<Key: CodingKey & CaseIterable>(_ type: Key.Type) -> Set<String> { Set(Key.allCases.map(\.stringValue)) }

    /// The schema's property names at each path.
    static func schemaKeys(_ paths: [[String]]) throws -> Set<String> {
        let data = try Data(contentsOf: packageRoot.appendingPathComponent("schema/job.schema.json"))
        var keys = Set<String>()
        for path in paths {
            var node: Any? = try JSONSerialization.jsonObject(with: data)
            for step in path {
                if let index = Int(step) { node = (node as? [Any]).flatMap { $0.indices.contains(index) ? $0[index] : nil } }
                else { node = (node as? [String: Any])?[step] }
            }
            let properties = try #require((node as? [String: Any])?["properties"] as? [String: Any], "no properties at \(path)")
            keys.formUnion(properties.keys)
        }
        return keys
    }

    /// The keys of the table under `heading`: each row's first cell, its `` `key` ``s (a cell may
    /// name two: `` `minSize`, `maxSize` ``); `x-...` is the ignored prefix, not a key.
    static func docsKeys(under heading: String) throws -> Set<String> {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("docs/manifest.md"), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: heading), "no heading \(heading)")
        var keys = Set<String>()
        var inTable = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("#") { break }
            if line.hasPrefix("|") {
                inTable = true
                let cell = line.split(separator: "|", omittingEmptySubsequences: true).first.map(String.init) ?? ""
                for key in cell.components(separatedBy: "`").enumerated().filter({ $0.offset % 2 == 1 }).map(\.element)
                    where key != "x-..." { keys.insert(key) }
            } else if inTable {
                break
            }
        }
        return keys
    }

    @Test(arguments: sections)
    func theSchemaListsTheDecodersKeys(section: Section) throws {
        let schema = try Self.schemaKeys(section.schema)
        #expect(section.keys.subtracting(schema).isEmpty, "\(section.name): read by the decoder, missing in the schema: \(section.keys.subtracting(schema).sorted())")
        #expect(schema.subtracting(section.keys).isEmpty, "\(section.name): in the schema, read by no decoder: \(schema.subtracting(section.keys).sorted())")
    }

    @Test(arguments: sections.filter { $0.docs != nil })
    func theDocsTablesListTheDecodersKeys(section: Section) throws {
        let docs = try Self.docsKeys(under: section.docs!)
        #expect(section.keys.subtracting(docs).isEmpty, "\(section.name): read by the decoder, missing in docs/manifest.md: \(section.keys.subtracting(docs).sorted())")
        #expect(docs.subtracting(section.keys).isEmpty, "\(section.name): in docs/manifest.md, read by no decoder: \(docs.subtracting(section.keys).sorted())")
    }

    /// The sections whose keys docs/manifest.md names in a row's text (lua:, hooks:, rules:):
    /// each key the decoder reads is named there.
    @Test func keysWithoutATableAreNamedInTheirRow() throws {
        let text = try String(contentsOf: packageRoot.appendingPathComponent("docs/manifest.md"), encoding: .utf8)
        for (row, keys) in [("| `lua` |", Self.names(LuaSettings.CodingKeys.self)), ("| `hooks` |", Self.names(HookSource.CodingKeys.self)),
                            ("| `rules` |", Self.names(MetadataRule.CodingKeys.self))] {
            let line = try #require(text.components(separatedBy: "\n").first { $0.hasPrefix(row) }, "no row \(row)")
            let missing = keys.filter { !line.contains("`\($0)") && !line.contains("\($0):") }
            #expect(missing.isEmpty, "\(row) does not name \(missing.sorted())")
        }
    }
}
