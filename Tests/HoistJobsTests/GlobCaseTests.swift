import Foundation
import HoistJobs
import HoistTestSupport
import Testing

/// `ignoreCase` on a file set: `**/*.jpg` takes `scan.JPG` too.
@Suite struct GlobCaseTests {
    @Test func ignoreCaseMatchesLettersWhateverTheirCase() throws {
        let fixture = try JobFixture()
        for path in ["a.jpg", "scans/SCAN.JPG", "b.png", "tmp/X.Tmp.jpg"] { try fixture.file(path) }
        let strict = try fixture.plan("storage: { url: 'file:b' }\nfiles: [{ root: src, include: '**/*.jpg', exclude: 'tmp/**' }]\n")
        #expect(strict.filter { $0.decision == .upload }.map(\.file.relativePath) == ["a.jpg"])
        let loose = try fixture.plan("""
            storage: { url: 'file:b' }
            files:
              - root: src
                include: '**/*.jpg'
                exclude: 'TMP/**'
                ignoreCase: true
                rules: [{ match: '*.JPG', metadata: { cacheControl: no-cache } }]

            """)
        let uploads = loose.filter { $0.decision == .upload }
        #expect(uploads.map(\.file.relativePath) == ["a.jpg", "scans/SCAN.JPG"])
        #expect(uploads.allSatisfy { $0.attributes.cacheControl == "no-cache" })
    }
}
