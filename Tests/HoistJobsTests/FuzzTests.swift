import Foundation
@testable import HoistJobs
import HoistLua
import HoistTestSupport
import HoistYAML
import Testing

/// Seeded random hostile input, grown from the corpus in Tests/fuzz/corpus: manifests for the
/// YAML decoder, templates, globs, and Lua snippets for the host API. Whatever the input, Hoist
/// must answer (a value or an error), never crash, and never take long. Runs in the normal suite
/// with a fixed seed; `HOIST_FUZZ_SEED` and `HOIST_FUZZ_ROUNDS` (a multiplier) explore further.
@Suite struct FuzzTests {
    static let corpus = packageRoot.appendingPathComponent("Tests/fuzz/corpus")
    static let seed = ProcessInfo.processInfo.environment["HOIST_FUZZ_SEED"].flatMap(UInt64.init) ?? 0x486F_6973_7421
    static let rounds = ProcessInfo.processInfo.environment["HOIST_FUZZ_ROUNDS"].flatMap(Int.init) ?? 1

    /// What an attacker types: structure, escapes, numbers at the edges, long runs.
    static let hostile: [String] = [
        "[", "]", "{", "}", "*", "**", "?", "&a ", "*a", "<<: ", "${", "${HOME:-", "$${", "\0", "\r\n", "\t", "\u{FFFD}",
        "%", "%b()", "%f[%w]", "(", ")", ".-", "\\", "\"", "'", "1e300", "-1", "9223372036854775808", "NaN", "inf", "..", "/",
        "{relpath}", "{mtime:%", "{env:", "{{", "}}", "\u{202E}", "\u{1F600}", ": ", "- ", "\n  ", "#", "!!binary ", "&x [*x, *x]",
        String(repeating: "[", count: 200), String(repeating: "{", count: 100), String(repeating: "a", count: 1000),
        String(repeating: "*a", count: 20), String(repeating: ".-", count: 12) + "b", "\\27Lua", "while true do end",
        "string.rep('x', 1e9)", "coroutine.wrap(function() end)", "json.decode('" + String(repeating: "[", count: 300) + "')",
    ]

    /// SplitMix64: the same inputs for the same seed, on every machine.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    }

    /// One to four edits: insert a hostile token, delete, duplicate or truncate.
    static func mutate(_ input: String, _ random: inout Random) -> String {
        var scalars = Array(input.unicodeScalars)
        for _ in 0...random.below(4) {
            let at = random.below(scalars.count + 1)
            switch random.below(5) {
            case 0, 1: scalars.insert(contentsOf: hostile[random.below(hostile.count)].unicodeScalars, at: at)
            case 2: scalars.removeSubrange(at..<min(scalars.count, at + random.below(8) + 1))
            case 3:
                let end = min(scalars.count, at + random.below(40) + 1)
                scalars.insert(contentsOf: scalars[at..<end], at: at)
            default: scalars.removeSubrange(min(at, scalars.count)...)
            }
        }
        var text = String.UnicodeScalarView()
        text.append(contentsOf: scalars)
        return String(text)
    }

    /// Runs `body` on each mutated input, and records any input that took longer than `limit`.
    func fuzz(_ seeds: [String], count: Int, salt: UInt64, limit: Double = 3, _ body: (String) -> Void) {
        var random = Random(state: Self.seed ^ salt)
        for index in 0..<(count * Self.rounds) {
            let input = Self.mutate(seeds[index % seeds.count], &random)
            let started = Date()
            body(input)
            let took = Date().timeIntervalSince(started)
            if took > limit {
                Issue.record("input #\(index) (seed \(Self.seed)) took \(took) s: \(input.debugDescription.prefix(300))")
            }
        }
    }

    func lines(_ file: String) throws -> [String] {
        try String(contentsOf: Self.corpus.appendingPathComponent(file), encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test func manifestsDecodeOrFailWithALocatedError() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).filter { $0.hasSuffix(".yaml") }.sorted()
        let seeds = try files.map { try String(contentsOf: Self.corpus.appendingPathComponent($0), encoding: .utf8) }
        #expect(seeds.count >= 4)
        var decoded = 0, located = 0
        fuzz(seeds, count: 600, salt: 1) { text in
            do {
                _ = try Job(text: text, file: "fuzz.yaml", environment: ["HOME": "/root"])
                decoded += 1
            } catch let error as YAMLError {
                if error.description.hasPrefix("fuzz.yaml:\(error.mark.line):\(error.mark.column): ") { located += 1 }
                else { Issue.record("unlocated error: \(error)") }
            } catch {
                Issue.record("not a YAMLError: \(error) for \(text.debugDescription.prefix(200))")
            }
        }
        #expect(decoded + located == 600 * Self.rounds)
    }

    @Test func templatesParseAndRenderOrFail() throws {
        let context = Template.Context(relativePath: "a/b/photo.jpg", modified: Date(), job: "fuzz", now: Date(), environment: ["HOME": "/root"])
        fuzz(try lines("templates.txt"), count: 1000, salt: 2) { text in
            guard let template = try? Template(parsing: text), let rendered = try? template.render(context) else { return }
            _ = try? normalizedObjectPath(rendered)
        }
    }

    @Test func globsParseAndMatchQuickly() throws {
        let paths = ["a/b/photo.jpg", ".thumbs/x", String(repeating: "a", count: 255), String(repeating: "a/", count: 2000) + "b",
                     "\u{FFFD}/\u{1F600}.png"]
        fuzz(try lines("globs.txt"), count: 400, salt: 3, limit: 2) { text in
            guard let glob = try? Glob(parsing: text) else { return }
            for path in paths { _ = glob.matches(path) }
        }
    }

    @Test func luaHostAPIAnswersHostileCalls() throws {
        let fixture = try JobFixture()
        try fixture.file("a.txt")
        let job = try fixture.job("""
            storage: { url: 'file:bucket' }
            files: [{ root: src }]
            lua: { instructionLimit: 1000000, memoryLimit: 16MiB, timeLimit: 1s }
            hooks: [{ inline: "-- fuzz" }]
            """)
        let bus = try HookBus(job: job, storage: try job.makeStorage()) { _ in }
        var loaded = 0, failed = 0
        fuzz(try lines("lua.txt"), count: 400, salt: 4) { code in
            do {
                _ = try bus.runtime.load(code, name: "fuzz.lua")
                loaded += 1
            } catch {
                failed += 1
            }
        }
        #expect(loaded + failed == 400 * Self.rounds)
        #expect(loaded > 0)
        // The job's folder holds nothing Hoist reads that a snippet wrote.
        let manifest = try String(contentsOf: fixture.directory.url.appendingPathComponent("job.yaml"), encoding: .utf8)
        #expect(manifest.hasSuffix("hooks: [{ inline: \"-- fuzz\" }]"))
    }
}
