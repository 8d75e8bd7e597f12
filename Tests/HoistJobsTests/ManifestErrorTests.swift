import Foundation
import HoistJobs
import HoistStorage
import HoistTestSupport
import HoistYAML
import Testing

/// Every file in Tests/manifests/broken is a manifest with one mistake; each must be reported
/// with its exact message, line and column, the source line and a caret under the column.
@Suite struct ManifestErrorTests {
    static let directory = packageRoot.appendingPathComponent("Tests/manifests/broken")

    @Test func theCorpusHasEveryCase() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".yaml") }
        #expect(files.count >= 25)
        #expect(Set(files) == Set(brokenManifests.map(\.file)))
    }

    @Test(arguments: brokenManifests)
    func reportsTheExactError(file: String, expected: String) throws {
        let path = Self.directory.appendingPathComponent(file).path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect {
            try Job(text: text, file: file, environment: ["HOME": "/root"])
        } throws: { error in
            guard let error = error as? YAMLError else { return false }
            #expect(error.summary == expected)
            // One mistake, one error: nothing made up by reading on past it. An empty document
            // lacks each of the four required keys.
            #expect(error.all.count == (file == "40-empty-document.yaml" ? 4 : 1), "\(error.all.map(\.summary))")
            // The description quotes the line and puts a caret under the column.
            let lines = error.all[0].description.split(separator: "\n", omittingEmptySubsequences: false)
            let sourceLines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if error.mark.line <= sourceLines.count {
                #expect(lines.count == 3)
                #expect(lines[1] == "    " + sourceLines[error.mark.line - 1])
                #expect(lines[2] == "    " + String(repeating: " ", count: error.mark.column - 1) + "^")
            }
            return error.summary == expected
        }
    }

    /// The `FILE:LINE:COL: message` of every mistake a manifest's text has.
    func mistakes(_ text: String, file: String) -> [String] {
        do {
            _ = try Job(text: text, file: file, environment: ["HOME": "/root"])
            return []
        } catch let error as YAMLError {
            return error.all.map(\.summary)
        } catch {
            return ["not a YAMLError: \(error)"]
        }
    }

    /// A mirror under a storage URL's own prefix (`s3://bucket/m1` with `{relpath}`, the layout
    /// jobs/s3-backup.yaml uses) is confined by it: allowed. Without one it deletes across the
    /// whole bucket and is refused, as before.
    /// `parallelUploads` takes `auto` (the default) and YAML's booleans, as words too.
    @Test func parallelUploadsTakesAutoAndBooleans() throws {
        for (word, expected) in [("auto", GCSOptions.ParallelUploads.auto), ("true", .always), ("'false'", .never), ("yes", .always)] {
            let job = try Job(text: "version: 1\nname: a\nstorage: { url: 'gs://b-1', parallelUploads: \(word) }\nfiles: [{ root: x }]\n",
                              file: "job.yaml", environment: ["HOME": "/root"])
            #expect((job.manifest.storage.options as? GCSOptions)?.parallelUploads == expected, "\(word)")
        }
    }

    @Test func aMirrorConfinedByTheURLsPrefixIsAllowed() {
        let set = "files:\n  - root: site\n    destination: '{relpath}'\n    mirror: true\n"
        #expect(mistakes("version: 1\nname: s\nstorage: { url: 's3://bucket/m1' }\n" + set, file: "m.yaml") == [])
        #expect(mistakes("version: 1\nname: s\nstorage: { url: 's3://bucket/m1/' }\n" + set, file: "m.yaml") == [])
        for url in ["s3://bucket", "s3://bucket/", "gs://bucket", "file:bucket"] {
            let found = mistakes("version: 1\nname: s\nstorage: { url: '\(url)' }\n" + set, file: "m.yaml")
            #expect(found == ["m.yaml:7:13: mirror on destination '{relpath}' would delete across the whole bucket: give the destination a fixed prefix (site/{relpath}), or set mirrorWholeBucket: true"], "\(url): \(found)")
        }
    }

    @Test func everyDuplicateKeyIsReportedInFileOrder() {
        let text = """
            version: 1
            name: a
            storage: { url: "file:bucket" }
            files:
              - root: x
                include: ["*.jpg"]
                include: ["*.png"]
            upload:
              concurrency: 2
              concurrency: 3
            name: b

            """
        #expect(mistakes(text, file: "jobs/dups.yaml") == [
            "jobs/dups.yaml:7:5: duplicate key 'include' (first at line 6)",
            "jobs/dups.yaml:10:3: duplicate key 'concurrency' (first at line 9)",
            "jobs/dups.yaml:11:1: duplicate key 'name' (first at line 2)",
        ])
    }

    /// `concurrency: eight` used to stop the reading of `upload:`, hiding the range error
    /// after it and the unknown key before it; a bad required value (`storage`'s url, a file
    /// set's root) stopped the whole manifest. Every mistake comes in one run, in file order.
    @Test func everyMistakeIsReportedInOnePass() {
        let text = """
            version: 1
            name: a
            storage: { url: "s3:/nope" }
            files:
              - root: [x]
                destination: "../../etc/{name}"
              - root: y
                hidden: maybe
            upload:
              maxSize: huge
              concurrency: eight
              retries: -1
            lua: { memoryLimit: lots }

            """
        #expect(mistakes(text, file: "jobs/all.yaml") == [
            "jobs/all.yaml:3:17: bad storage url 's3:/nope': use \(BackendRegistry.forms)",
            "jobs/all.yaml:5:11: expected a string in files[0].root, found a list",
            "jobs/all.yaml:6:18: destination '../../etc/{name}' has a '..' segment: object names stay below the bucket's root, and '..' cannot be normalized away",
            "jobs/all.yaml:8:13: expected true or false in files[1].hidden, got 'maybe'",
            "jobs/all.yaml:10:3: unknown key 'maxSize'",
            "jobs/all.yaml:11:16: expected an integer in upload.concurrency, got 'eight'",
            "jobs/all.yaml:12:12: retries -1 is out of range 0-100",
            "jobs/all.yaml:13:21: bad size 'lots': write a number with an optional unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
        ])
    }

    /// A new user's mistakes in globs and templates: every bad glob of a list, a rule's bad
    /// template after its bad match, and a number where a glob belongs, all in one pass.
    @Test func everyBadGlobAndTemplateIsReportedInOnePass() {
        let text = """
            version: 1
            name: a
            storage: { url: "file:bucket" }
            files:
              - root: x
                destination: "x/{mtime:%Y"
                include: ["*.jpg", "[a", "b]"]
                exclude: 42
                rules:
                  - { match: "[z", metadata: { cacheControl: "{mtime:%Y" } }
              - root: y
                include: ["*.png", 7, true]
            upload:
              concurrency: eight

            """
        #expect(mistakes(text, file: "jobs/globs.yaml") == [
            "jobs/globs.yaml:6:18: bad template 'x/{mtime:%Y': '{' is never closed",
            "jobs/globs.yaml:7:24: bad glob '[a': '[' is never closed",
            "jobs/globs.yaml:7:30: bad glob 'b]': ']' without '['",
            "jobs/globs.yaml:8:14: expected a glob in files[0].exclude, got the number 42: write it in quotes ('42') to match a file of that name",
            "jobs/globs.yaml:10:18: bad glob '[z': '[' is never closed",
            "jobs/globs.yaml:10:50: bad template '{mtime:%Y': '{' is never closed",
            "jobs/globs.yaml:12:24: expected a glob in files[1].include[1], got the number 7: write it in quotes ('7') to match a file of that name",
            "jobs/globs.yaml:12:27: expected a glob in files[1].include[2], got true: write it in quotes ('true') to match a file of that name",
            "jobs/globs.yaml:14:16: expected an integer in upload.concurrency, got 'eight'",
        ])
        // Quoted, a number is a glob like any other.
        #expect(mistakes(text.replacingOccurrences(of: "exclude: 42", with: "exclude: '42'"), file: "j.yaml").filter { $0.contains("42") }.isEmpty)
    }

    /// A missing envFile is said in words, its path as written (and where a relative one was
    /// looked for), at the envFile key.
    @Test func aMissingEnvFileIsNamedAsWritten() throws {
        let directory = try TemporaryDirectory()
        let manifest = directory.path + "/job.yaml"
        for (given, expected) in [("/nowhere/hoist.env", "envFile /nowhere/hoist.env does not exist"),
                                  ("secrets/hoist.env", "envFile secrets/hoist.env does not exist (looked for \(directory.url.standardizedFileURL.path)/secrets/hoist.env: "
                                      + "a relative envFile is read from the manifest's folder)")] {
            let text = "version: 1\nname: a\nenvFile: \(given)\nstorage: { url: 'file:b' }\nfiles: [{ root: src }]\n"
            try text.write(toFile: manifest, atomically: true, encoding: .utf8)
            #expect(mistakes(text, file: manifest) == ["\(manifest):3:10: \(expected)"])
            let validated = try runProcess(hoist, ["validate", manifest])
            #expect(validated.status == 2)
            #expect(validated.stderr.hasPrefix("\(manifest):3:10: \(expected)\n"), "\(validated.stderr)")
            #expect(!validated.stderr.contains("could not be completed"), "\(validated.stderr)")
        }
    }

    /// A key of another backend on a storage that does not take it: the message says which
    /// keys this storage takes.
    @Test func aKeyTheStorageDoesNotTakeSaysWhatItTakes() {
        let text = "version: 1\nname: a\nstorage: { url: 'file:b', region: eu-west-1 }\nfiles: [{ root: src }]\n"
        #expect(mistakes(text, file: "j.yaml") == ["j.yaml:3:27: unknown key 'region': a file: storage takes only url (region is a key of s3: storage)"])
        let typo = "version: 1\nname: a\nstorage: { url: 'file:b', ulr: x }\nfiles: [{ root: src }]\n"
        #expect(mistakes(typo, file: "j.yaml") == ["j.yaml:3:27: unknown key 'ulr' (did you mean 'url'?): a file: storage takes only url"])
    }

    /// A manifest that cannot be read says why in words, not Foundation's "The
    /// operation could not be completed".
    @Test func aManifestThatCannotBeReadSaysWhy() throws {
        let directory = try TemporaryDirectory()
        for (path, reason) in [(directory.path + "/gone.yaml", "there is no such file"), (directory.path, "it is a folder, not a manifest")] {
            #expect {
                _ = try Job(file: path, environment: ["HOME": "/root"])
            } throws: { error in
                guard let error = error as? YAMLError else { return false }
                return error.summary.hasPrefix("\(path):1:1: cannot read the manifest: \(reason)")
            }
        }
    }

    @Test func aSyntaxErrorComesWithTheDuplicateKeysBeforeIt() {
        let text = """
            version: 1
            name: a
            name: b
            storage: { url: "file:bucket" }
            files: [{ root: x }

            """
        let found = mistakes(text, file: "jobs/both.yaml")
        #expect(found == [
            "jobs/both.yaml:3:1: duplicate key 'name' (first at line 2)",
            "jobs/both.yaml:6:1: did not find expected ',' or ']' (while parsing a flow sequence at line 5, column 8)",
        ])
    }
}

private let dollar = "$"

let brokenManifests: [(file: String, expected: String)] = [
    ("01-unclosed-flow.yaml", "01-unclosed-flow.yaml:5:1: did not find expected ',' or ']' (while parsing a flow sequence at line 4, column 8)"),
    ("02-mapping-in-scalar.yaml", "02-mapping-in-scalar.yaml:2:8: mapping values are not allowed in this context"),
    ("03-tab-indent.yaml", "03-tab-indent.yaml:4:1: found character that cannot start any token (while scanning for the next token at line 4, column 1); YAML indents with spaces, not tabs"),
    ("04-unknown-top-key.yaml", "04-unknown-top-key.yaml:5:1: unknown key 'scheduel' (did you mean 'schedule'?)"),
    ("05-unknown-upload-key.yaml", "05-unknown-upload-key.yaml:6:3: unknown key 'concurency' (did you mean 'concurrency'?)"),
    ("06-unknown-fileset-key.yaml", "06-unknown-fileset-key.yaml:6:5: unknown key 'destinaton' (did you mean 'destination'?)"),
    ("07-missing-version.yaml", "07-missing-version.yaml:1:1: missing required key 'version'"),
    ("08-missing-name.yaml", "08-missing-name.yaml:1:1: missing required key 'name'"),
    ("09-missing-url.yaml", "09-missing-url.yaml:3:10: missing required key 'url' in storage"),
    ("10-missing-root.yaml", "10-missing-root.yaml:5:5: missing required key 'root' in files[0]"),
    ("11-version-not-int.yaml", "11-version-not-int.yaml:1:10: expected an integer in version, got 'one'"),
    ("12-concurrency-not-int.yaml", "12-concurrency-not-int.yaml:5:24: expected an integer in upload.concurrency, got 'many'"),
    ("13-files-not-list.yaml", "13-files-not-list.yaml:5:3: expected a list in files, found a mapping"),
    ("14-include-mapping.yaml", "14-include-mapping.yaml:6:14: expected a list in files[0].include, found a mapping"),
    ("15-hidden-not-bool.yaml", "15-hidden-not-bool.yaml:6:13: expected true or false in files[0].hidden, got 'maybe'"),
    ("16-version-2.yaml", "16-version-2.yaml:1:10: unsupported version 2: this Hoist reads version 1"),
    ("17-bad-name.yaml", "17-bad-name.yaml:2:7: bad job name 'my job': use letters, digits, '.', '_' and '-'"),
    ("18-bad-scheme.yaml", "18-bad-scheme.yaml:3:17: bad storage url '\(unservedScheme)://bucket': use \(BackendRegistry.forms)"),
    ("19-gs-with-path.yaml", "19-gs-with-path.yaml:3:17: bad storage url 'gs://bucket/photos': a gs:// url names only a bucket (put paths in destination)"),
    ("20-empty-files.yaml", "20-empty-files.yaml:4:8: files is empty: list at least one file set"),
    ("21-concurrency-zero.yaml", "21-concurrency-zero.yaml:6:16: concurrency 0 is out of range 1-256"),
    ("22-bad-size.yaml", "22-bad-size.yaml:6:14: bad size '10XB': write a number with an optional unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"),
    ("23-bad-rate.yaml", "23-bad-rate.yaml:6:14: bad rate '50MB': write a size per second, such as 50MB/s or 512KiB/s"),
    ("24-glob-unclosed-class.yaml", "24-glob-unclosed-class.yaml:6:24: bad glob '[abc': '[' is never closed"),
    ("25-glob-unclosed-brace.yaml", "25-glob-unclosed-brace.yaml:6:14: bad glob '**/*.{tmp,bak': '{' is never closed"),
    ("26-template-unknown.yaml", "26-template-unknown.yaml:6:18: bad template 'img/{basename}': unknown placeholder {basename}; use one of {relpath}, {dir}, {name}, {stem}, {ext}, {job}, {hostname}, {env:VAR}, {mtime:FORMAT}, {now:FORMAT}"),
    ("27-template-unclosed.yaml", "27-template-unclosed.yaml:6:18: bad template 'img/{relpath': '{' is never closed"),
    ("28-cron-range.yaml", "28-cron-range.yaml:5:11: bad cron expression '61 * * * *': minute 61 is out of range 0-59"),
    ("29-cron-fields.yaml", "29-cron-fields.yaml:5:11: bad cron expression '0 3 *': it needs 5 fields (minute hour day-of-month month day-of-week), found 3"),
    ("30-duplicate-key.yaml", "30-duplicate-key.yaml:4:1: duplicate key 'name' (first at line 2)"),
    ("31-unset-env.yaml", "31-unset-env.yaml:4:14: environment variable HOIST_TEST_UNSET_BUCKET is not set (write ${HOIST_TEST_UNSET_BUCKET:-default} for a default)"),
    ("32-min-over-max.yaml", "32-min-over-max.yaml:7:14: maxSize (1000000 B) is smaller than minSize (10000000 B)"),
    ("33-bad-duration.yaml", "33-bad-duration.yaml:6:13: bad duration '10 minutes': write a number with ms, s, m, h or d, such as 30s or 5m"),
    ("34-unknown-alias.yaml", "34-unknown-alias.yaml:5:5: unknown alias '*common': no anchor '&common' before it"),
    ("35-metadata-typo.yaml", "35-metadata-typo.yaml:7:7: unknown key 'cacheControll' (did you mean 'cacheControl'?)"),
    ("36-max-errors-zero.yaml", "36-max-errors-zero.yaml:5:22: maxErrors must be at least 1"),
    ("37-cron-name.yaml", "37-cron-name.yaml:5:11: bad cron expression '0 3 * * funday': 'funday' is not a valid day of week"),
    ("38-rule-without-metadata.yaml", "38-rule-without-metadata.yaml:7:9: missing required key 'metadata' in files[0].rules[0]"),
    ("39-merge-scalar.yaml", "39-merge-scalar.yaml:6:9: a merge key ('<<') takes a mapping or a list of mappings, not a scalar"),
    ("40-empty-document.yaml", "40-empty-document.yaml:1:1: missing required key 'version'"),
    ("41-size-too-large.yaml", "41-size-too-large.yaml:6:14: size '10000000000TiB' is too large: at most 8 EiB (9223372036854775807 bytes)"),
    ("42-rate-too-large.yaml", "42-rate-too-large.yaml:6:14: rate '1e30B/s' is too large: at most 8 EiB/s"),
    ("43-memory-limit-too-large.yaml", "43-memory-limit-too-large.yaml:6:16: size '1e300' is too large: at most 8 EiB (9223372036854775807 bytes)"),
    ("44-duration-too-long.yaml", "44-duration-too-long.yaml:6:14: duration '1e300s' is too long: at most 100 years"),
    ("45-deep-nesting.yaml", "45-deep-nesting.yaml:5:77: nested deeper than 64 levels: a manifest needs far fewer"),
    ("46-header-injection.yaml", "46-header-injection.yaml:6:30: bad template 'text/plain\\r\\nX-Injected: yes': it contains the control character U+000D, which object names and header values cannot"),
    ("47-rate-unit-case.yaml", "47-rate-unit-case.yaml:6:14: bad rate '50mb/s': units are case-sensitive (did you mean '50MB/s'?)"),
    ("48-size-unit-case.yaml", "48-size-unit-case.yaml:6:14: bad size '2gib': units are case-sensitive (did you mean '2GiB'?)"),
    ("49-destination-parent.yaml", "49-destination-parent.yaml:6:18: destination '../../etc/{name}' has a '..' segment: object names stay below the bucket's root, and '..' cannot be normalized away"),
    ("50-mirror-whole-bucket.yaml", "50-mirror-whole-bucket.yaml:6:13: mirror on destination '{relpath}' would delete across the whole bucket: give the destination a fixed prefix (site/{relpath}), or set mirrorWholeBucket: true"),
    ("51-max-delete.yaml", "51-max-delete.yaml:8:22: bad maxDelete '10 percent': write a count (50) or a percentage of the mirrored objects (10%)"),
    ("52-move-and-mirror.yaml", "52-move-and-mirror.yaml:8:11: move and mirror together would delete every object whose file was moved: choose one"),
    ("70-compress-format.yaml", "70-compress-format.yaml:6:15: compress 'zip' is not a format: use gzip, or { format: gzip, level: 6, include: [GLOBS] }"),
    ("71-compress-level.yaml", "71-compress-level.yaml:6:38: compress level 12 is out of range 1-9"),
    ("72-skip-unchanged-mode.yaml", "72-skip-unchanged-mode.yaml:6:18: skipUnchanged is true, false or checksum, not 'content'"),
    ("73-cpu-range.yaml", "73-cpu-range.yaml:6:8: cpu 300 is out of range 1-256"),
    ("74-watch-window.yaml", "74-watch-window.yaml:6:11: window must be between 1s and 1d"),
    ("75-parallel-uploads.yaml", "75-parallel-uploads.yaml:3:46: parallelUploads is auto, true or false, not \"sometimes\""),
]
