import Foundation
import HoistStorage
import Testing

/// The hand-written JSON of `ObjectResource` means what Foundation's `Codable` form means: on
/// random resources (names and values with quotes, backslashes, control characters and
/// non-ASCII text), each reads the other's output back to the same value; server answers with
/// keys Hoist does not know are read; what is not an object resource is refused, never crashes.
@Suite struct ObjectResourceJSONTests {
    static func randomText(_ generator: inout some RandomNumberGenerator) -> String {
        let pieces = ["a", "photos/", "\"", "\\", "\n", "\t", "\u{1}", "\u{7f}", "é", "日本", "😀", "/", " ", "{", "}", ":"]
        return (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    static func randomResource(_ generator: inout some RandomNumberGenerator) -> ObjectResource {
        func maybe<T>(_ make: () -> T) -> T? { Bool.random(using: &generator) ? make() : nil }
        var resource = ObjectResource()
        resource.bucket = maybe { randomText(&generator) }
        resource.name = maybe { randomText(&generator) }
        resource.size = maybe { Int64.random(in: 0...Int64.max, using: &generator) }
        resource.md5Hash = maybe { randomText(&generator) }
        resource.crc32c = maybe { randomText(&generator) }
        resource.generation = maybe { Int64.random(in: Int64.min...Int64.max, using: &generator) }
        resource.metageneration = maybe { Int64.random(in: 1...9, using: &generator) }
        resource.timeCreated = maybe { Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_000_000_000_000, using: &generator)) / 1000) }
        resource.updated = maybe { Date(timeIntervalSince1970: 1_700_000_000.123) }
        for field in ObjectResource.headerFields { resource[keyPath: field.keyPath] = maybe { randomText(&generator) } }
        resource.metadata = maybe {
            Dictionary((0..<Int.random(in: 0...3, using: &generator)).map { _ in (randomText(&generator), randomText(&generator)) },
                       uniquingKeysWith: { a, _ in a })
        }
        return resource
    }

    @Test func readsWhatFoundationWritesAndFoundationReadsWhatItWrites() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let resource = Self.randomResource(&generator)
            let foundation = try JSONEncoder().encode(resource)
            #expect(try ObjectResource(json: foundation) == JSONDecoder().decode(ObjectResource.self, from: foundation))
            let ours = resource.jsonData()
            #expect(try JSONDecoder().decode(ObjectResource.self, from: ours) == ObjectResource(json: ours))
            #expect(try ObjectResource(json: ours) == JSONDecoder().decode(ObjectResource.self, from: foundation))
        }
    }

    @Test func readsAServersAnswerWithKeysItDoesNotKnow() throws {
        let answer = #"""
            {"kind": "storage#object", "id": "b/o/1", "selfLink": "https://x/o?a=1\/2",
             "name": "photos\/caf\u00e9 \ud83d\ude00.jpg", "bucket": "b", "generation": "1700000000123456",
             "metageneration": 1, "contentType": "image/jpeg", "size": "4096",
             "acl": [{"entity": "user-x", "role": "OWNER", "projectTeam": {"team": "owners"}}, true, null, -1.5e3],
             "md5Hash": "bWQ1", "crc32c": "AAAAAA==", "timeCreated": "2026-11-23T09:10:31.123Z",
             "metadata": {"firebaseStorageDownloadTokens": "t", "team": "web"}}
            """#
        let resource = try ObjectResource(json: Data(answer.utf8))
        #expect(resource == (try JSONDecoder().decode(ObjectResource.self, from: Data(answer.utf8))))
        #expect(resource.name == "photos/café 😀.jpg" && resource.size == 4096 && resource.generation == 1_700_000_000_123_456)
        #expect(resource.metadata == ["firebaseStorageDownloadTokens": "t", "team": "web"])
    }

    @Test(arguments: ["", "[]", "{", #"{"name":}"#, #"{"size":"12x"}"#, #"{"name":"a\q"}"#, #"{"name":"\ud800"}"#,
                      #"{"metadata":{"a":1}}"#, #"{"name":"a"} x"#, #"{"updated":"yesterday"}"#, "\u{0}",
                      // Skipped values are checked as read ones: a key that is no string, a bad escape, an end
                      // inside a string, a control character in one.
                      #"{"acl":{1:"a"}}"#, #"{"kind":"a\q"}"#, #"{"kind":"abc"#, "{\"kind\":\"a\u{1}b\"}",
                      String(repeating: #"{"x":["#, count: 100) + String(repeating: "]}", count: 100)])
    func refusesWhatIsNotAnObjectResource(text: String) {
        #expect(throws: ObjectResource.JSONError.self) { try ObjectResource(json: Data(text.utf8)) }
    }

    /// Integers at the edges of `Int64`, as strings and as numbers, read as Foundation's form
    /// reads them; one past an edge is refused.
    @Test func readsIntegersAtTheirLimits() throws {
        for text in [#"{"size":"9223372036854775807","generation":"-9223372036854775808","metageneration":0}"#,
                     #"{"size":0,"generation":-1,"metageneration":"+5"}"#] {
            let resource = try ObjectResource(json: Data(text.utf8))
            #expect(resource == (try JSONDecoder().decode(ObjectResource.self, from: Data(text.utf8))), "\(text)")
        }
        #expect(try ObjectResource(json: Data(#"{"size":"9223372036854775807"}"#.utf8)).size == .max)
        #expect(try ObjectResource(json: Data(#"{"generation":-9223372036854775808}"#.utf8)).generation == .min)
        for text in [#"{"size":"9223372036854775808"}"#, #"{"size":-9223372036854775809}"#, #"{"size":"-"}"#, #"{"size":""}"#,
                     #"{"size":"1 "}"#] {
            #expect(throws: ObjectResource.JSONError.self, "\(text)") { try ObjectResource(json: Data(text.utf8)) }
        }
    }

    /// Bytes that are not UTF-8, in a value read, a value skipped or a key, are refused.
    @Test func refusesBytesThatAreNotUTF8() throws {
        for bytes: [UInt8] in [Array(#"{"name":""#.utf8) + [0xFF] + Array(#""}"#.utf8),
                               Array(#"{"kind":""#.utf8) + [0xC3] + Array(#""}"#.utf8),
                               Array(#"{""#.utf8) + [0xE2, 0x82] + Array(#"":1}"#.utf8)] {
            #expect(throws: ObjectResource.JSONError.self) { try ObjectResource(json: Data(bytes)) }
        }
        // Non-ASCII keys and values that are UTF-8 are read.
        let text = #"{"näme":"x","name":"café"}"#
        #expect(try ObjectResource(json: Data(text.utf8)).name == "café")
    }
}
