import Foundation
import HoistJobs
import HoistStorage
import HoistYAML
import Testing

@Suite struct GlobTests {
    @Test(arguments: [
        ("*.jpg", "a.jpg", true), ("*.jpg", "dir/a.jpg", true), ("*.jpg", "a.jpeg", false), ("*.jpg", "a.jpg.bak", false),
        ("**/*.jpg", "a.jpg", true), ("**/*.jpg", "x/y/z/a.jpg", true), ("**/*.jpg", "x/y/a.png", false),
        ("img/*.png", "img/a.png", true), ("img/*.png", "img/sub/a.png", false), ("img/*.png", "other/img/a.png", false),
        ("img/**", "img/a/b/c", true), ("img/**", "image/a", false), ("**/.thumbs/**", "a/.thumbs/x.jpg", true),
        ("**/.thumbs/**", ".thumbs/x.jpg", true), ("**/.thumbs/**", "a/thumbs/x.jpg", false),
        ("a/**/b", "a/b", true), ("a/**/b", "a/x/y/b", true), ("a/**/b", "a/x/c", false),
        ("file?.txt", "file1.txt", true), ("file?.txt", "file10.txt", false), ("file?.txt", "file/.txt", false),
        ("[a-c]*.log", "b1.log", true), ("[a-c]*.log", "d1.log", false), ("[!a-c]*.log", "d1.log", true),
        ("[!a-c]*.log", "a1.log", false), ("*.{jpg,png}", "a.png", true), ("*.{jpg,png}", "a.gif", false),
        ("{docs,img}/**/*.md", "docs/x/y.md", true), ("{docs,img}/**/*.md", "src/y.md", false),
        ("*.log.[0-9]", "app.log.3", true), ("*.log.[0-9]", "app.log.10", false), ("*", "anything", true),
        ("*", "a/b", true),   // no '/' in the pattern: matches the name in any folder
    ])
    func matches(pattern: String, path: String, expected: Bool) throws {
        #expect(try Glob(parsing: pattern).matches(path) == expected)
    }

    @Test(arguments: ["", "[abc", "a]", "{a,b", "a}", "[]", "[z-a]"])
    func rejects(pattern: String) {
        #expect(throws: ValueError.self) { try Glob(parsing: pattern) }
    }
}

@Suite struct TemplateTests {
    let context = Template.Context(
        relativePath: "2024/trip/IMG_0001.final.JPG", modified: Date(timeIntervalSince1970: 1_700_000_000), job: "photos",
        now: Date(timeIntervalSince1970: 1_800_000_000), hostname: "nas", environment: ["REGION": "eu"],
        timeZone: TimeZone(identifier: "UTC")!)

    @Test(arguments: [
        ("{relpath}", "2024/trip/IMG_0001.final.JPG"), ("{dir}", "2024/trip"), ("{name}", "IMG_0001.final.JPG"),
        ("{stem}", "IMG_0001.final"), ("{ext}", "JPG"), ("{job}/{hostname}", "photos/nas"), ("{env:REGION}/x", "eu/x"),
        ("{mtime:%Y/%m/%d}/{name}", "2023/11/14/IMG_0001.final.JPG"), ("{now:%Y-%m-%dT%H}", "2027-01-15T08"),
        ("a{{b}}c", "a{b}c"), ("plain", "plain"),
    ])
    func renders(template: String, expected: String) throws {
        #expect(try Template(parsing: template).render(context) == expected)
    }

    @Test func fileWithoutExtensionOrFolder() throws {
        var flat = context
        flat.relativePath = "README"
        #expect(try Template(parsing: "[{dir}][{stem}][{ext}]").render(flat) == "[][README][]")
        flat.relativePath = ".profile"
        #expect(try Template(parsing: "{stem}|{ext}").render(flat) == ".profile|")
    }

    @Test func unsetEnvironmentVariableIsAnError() throws {
        #expect(throws: ValueError.self) { try Template(parsing: "{env:NOPE}").render(context) }
    }

    @Test(arguments: ["{nope}", "{relpath", "a}b", "{env}", "{mtime:}", "{now}"])
    func rejects(template: String) {
        #expect(throws: ValueError.self) { try Template(parsing: template) }
    }

    @Test(arguments: [("a//b/./c", "a/b/c"), ("/lead/trail/", "lead/trail"), ("x", "x")])
    func normalizes(path: String, expected: String) throws {
        #expect(try normalizedObjectPath(path) == expected)
    }

    @Test(arguments: ["../escape", "a/../../b", "a/..", "", "/./"])
    func neverLeavesThePrefix(path: String) {
        #expect(throws: ValueError.self) { try normalizedObjectPath(path) }
    }
}

@Suite struct ValueParsingTests {
    @Test(arguments: [("512", 512), ("4KiB", 4096), ("10 MB", 10_000_000), ("1.5GiB", 1_610_612_736), ("2KB", 2000)] as [(String, Int64)])
    func sizes(text: String, bytes: Int64) throws {
        #expect(try ByteSize.parse(text).bytes == bytes)
    }

    @Test func ratesAndDurations() throws {
        #expect(try ByteRate.parse("50MB/s").bytesPerSecond == 50_000_000)
        #expect(try ByteRate.parse("512KiB/s").bytesPerSecond == 524_288)
        #expect(throws: ValueError.self) { try ByteRate.parse("0MB/s") }
        #expect(try TimeSpan.parse("500ms").seconds == 0.5)
        #expect(try TimeSpan.parse("10m").seconds == 600)
        #expect(try TimeSpan.parse("1d").seconds == 86400)
        #expect(try TimeSpan.parse("45").seconds == 45)
    }

    @Test func cron() throws {
        let expression = try CronExpression.parse("*/15 3,4 1-7 jan-mar mon-fri")
        #expect(expression.fields[0] == [0, 15, 30, 45])
        #expect(expression.fields[1] == [3, 4])
        #expect(expression.fields[2] == Set(1...7))
        #expect(expression.fields[3] == [1, 2, 3])
        #expect(expression.fields[4] == [1, 2, 3, 4, 5])
        #expect(try CronExpression.parse("@daily").fields[1] == [0])
        #expect(try CronExpression.parse("0 0 * * 7").fields[4] == [0])
        for bad in ["* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "*/0 * * * *", "5-1 * * * *", "x * * * *"] {
            #expect(throws: ValueError.self) { try CronExpression.parse(bad) }
        }
    }
}

@Suite struct YAMLFeatureTests {
    struct Doc: Decodable {
        let a: Inner
        let b: Inner
        let c: [String]
        let d: String?
    }
    struct Inner: Decodable {
        let x: Int
        let y: String
    }

    @Test func anchorsAliasesAndMergeKeys() throws {
        let text = """
            base: &base { x: 1, y: from-base }
            a: *base
            b:
              <<: *base
              y: own
            c: [one, two]
            """
        struct WithBase: Decodable {
            let base: Inner
            let a: Inner
            let b: Inner
            let c: [String]
        }
        let doc = try YAMLDecoder(environment: [:]).decode(WithBase.self, from: text, file: "t.yaml")
        #expect(doc.a.x == 1 && doc.a.y == "from-base")
        #expect(doc.b.x == 1 && doc.b.y == "own")
        #expect(doc.c == ["one", "two"])
    }

    @Test func environmentVariables() throws {
        let text = "a: { x: 1, y: \"${HOST}-${PORT:-80}-$${literal}\" }\nb: { x: 2, y: '${EMPTY:-fallback}' }\nc: []\n"
        let doc = try YAMLDecoder(environment: ["HOST": "h", "EMPTY": ""]).decode(Doc.self, from: text, file: "t.yaml")
        #expect(doc.a.y == "h-80-${literal}")
        #expect(doc.b.y == "fallback")
        #expect(doc.d == nil)
    }

    @Test func dictionariesTakeAnyKey() throws {
        struct Meta: Decodable { let custom: [String: String] }
        let doc = try YAMLDecoder(environment: [:]).decode(Meta.self, from: "custom: { anything: 1, else: two }", file: "t")
        #expect(doc.custom == ["anything": "1", "else": "two"])
    }
}
