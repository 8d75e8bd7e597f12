import Foundation
import Testing
@testable import HoistJobs

/// Which listed keys a mirror may take for its own (`RemovalGate.isMirrorCandidate`): byte for
/// byte under its prefix, no dot segments, no folder markers, a name its template could make,
/// and none under another file set's prefix (nothing is removed on Hoist's word alone).
@Suite struct MirrorCandidateTests {
    let relpath = try! Template(parsing: "site/{relpath}")

    @Test func keysWithDotOrEmptySegmentsAndFolderMarkersAreNeverCandidates() {
        for key in ["site/../victim.txt", "site/./a.txt", "site//a.txt", "site/a/..", "site/sub/", "site/.", "site/"] {
            #expect(!RemovalGate.isMirrorCandidate(key, prefix: "site/", template: relpath, others: []), "\(key)")
        }
        for key in ["site/a.txt", "site/sub/b.txt", "site/..hidden", "site/.well-known/x"] {
            #expect(RemovalGate.isMirrorCandidate(key, prefix: "site/", template: relpath, others: []), "\(key)")
        }
    }

    /// The NFD form of a prefix is another name: `hasPrefix` (canonical equivalence) took it.
    @Test func thePrefixIsComparedByteForByte() {
        let nfc = "caf\u{E9}/"          // é, one scalar
        let nfd = "cafe\u{301}/"        // e and a combining acute
        let template = try! Template(parsing: nfc + "{relpath}")
        #expect(RemovalGate.isMirrorCandidate(nfc + "a.txt", prefix: nfc, template: template, others: []))
        #expect((nfd + "a.txt").hasPrefix(nfc), "Swift's hasPrefix takes it")
        #expect(!RemovalGate.isMirrorCandidate(nfd + "a.txt", prefix: nfc, template: template, others: []))
    }

    @Test func aNestedFileSetsObjectsAreNotTheOuterSets() {
        #expect(!RemovalGate.isMirrorCandidate("site/blog/post.html", prefix: "site/", template: relpath, others: ["site/blog/"]))
        #expect(RemovalGate.isMirrorCandidate("site/blogroll.html", prefix: "site/", template: relpath, others: ["site/blog/"]))
    }

    @Test func aKeyMustBeOneTheTemplateCouldMake() throws {
        let logs = try Template(parsing: "logs/{mtime:%Y}/{stem}.{ext}.gz")
        #expect(logs.couldMake("logs/2026/app.log.gz"))
        #expect(logs.couldMake("logs/2026/11/app.log.gz"), "a format may hold a slash")
        #expect(!logs.couldMake("logs/2026/app.log"))
        #expect(!logs.couldMake("other/2026/app.log.gz"))
        let named = try Template(parsing: "by-name/{name}")
        #expect(named.couldMake("by-name/a.txt"))
        #expect(!named.couldMake("by-name/sub/a.txt"), "{name} holds no slash")
        #expect(!named.couldMake("by-name/"), "{name} is not empty")
        #expect(relpath.couldMake("site/a/b/c"))
        #expect(!relpath.couldMake("site/"))
        #expect(try Template(parsing: "/lead/{relpath}").couldMake("lead/x"), "a leading slash is dropped, as in object names")
        #expect(!RemovalGate.isMirrorCandidate("by-name/sub/a.txt", prefix: "by-name/", template: named, others: []))
    }
}
