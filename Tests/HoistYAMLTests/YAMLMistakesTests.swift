import Testing
@testable import HoistYAML

/// Mistakes the composer finds (duplicate keys, syntax errors) are all reported, in file order,
/// not just the first: one `validate` shows what to mend.
@Suite struct YAMLMistakesTests {
    func mistakes(_ text: String, file: String = "job.yaml") -> [String] {
        do {
            _ = try YAMLDecoder(environment: [:]).compose(text, file: file)
            return []
        } catch let error as YAMLError {
            return error.all.map(\.summary)
        } catch {
            return ["not a YAMLError: \(error)"]
        }
    }

    @Test func everyDuplicateKeyOfADocumentIsReported() {
        let text = """
            name: a
            upload:
              concurrency: 4
              retries: 2
              concurrency: 8
            name: b
            files:
              - { root: x, root: y }
            name: c

            """
        #expect(mistakes(text) == [
            "job.yaml:5:3: duplicate key 'concurrency' (first at line 3)",
            "job.yaml:6:1: duplicate key 'name' (first at line 1)",
            "job.yaml:8:16: duplicate key 'root' (first at line 8)",
            "job.yaml:9:1: duplicate key 'name' (first at line 1)",
        ])
    }

    /// A duplicate key does not stop the reading: the first value stands, and the mistakes in
    /// the values (of that key's first value too) come in the same report, in file order.
    @Test func aDuplicateKeyDoesNotHideTheOtherMistakes() {
        struct Document: Decodable {
            let name: String
            let count: Int?
            let size: Int?
        }
        let text = "name: a\ncount: eight\nname: b\nsize: huge\n"
        do {
            _ = try YAMLDecoder(environment: [:]).decode(Document.self, from: text, file: "job.yaml")
            Issue.record("decoded")
        } catch let error as YAMLError {
            let lines = error.all.map { ($0.mark.line, $0.summary) }
            #expect(lines.map(\.0) == [2, 3, 4], "\(lines)")
            #expect(lines.map(\.1).contains("job.yaml:3:1: duplicate key 'name' (first at line 1)"), "\(lines)")
        } catch {
            Issue.record("not a YAMLError: \(error)")
        }
    }

    @Test func duplicateKeysBeforeASyntaxErrorAreReportedWithIt() {
        let text = """
            name: a
            name: b
            files: [{ root: x }, { root: y, root: z }
            upload: { concurrency: 1 }

            """
        #expect(mistakes(text) == [
            "job.yaml:2:1: duplicate key 'name' (first at line 1)",
            "job.yaml:3:33: duplicate key 'root' (first at line 3)",
            "job.yaml:4:1: did not find expected ',' or ']' (while parsing a flow sequence at line 3, column 8)",
        ])
    }

    @Test func aSyntaxErrorAloneIsOneMistakeWithItsCaret() throws {
        let text = "name: a\nfiles: x: y\n"
        #expect(mistakes(text) == ["job.yaml:2:9: mapping values are not allowed in this context"])
        do {
            _ = try YAMLDecoder(environment: [:]).compose(text, file: "job.yaml")
        } catch let error as YAMLError {
            #expect(error.more.isEmpty)
            #expect(error.description == "job.yaml:2:9: mapping values are not allowed in this context\n    files: x: y\n            ^")
        }
    }

    @Test func unsetVariablesAndDuplicateKeysComeTogetherInFileOrder() {
        let text = "a: ${HOIST_NOT_SET}\nb: 1\na: 2\n"
        #expect(mistakes(text) == [
            "job.yaml:1:4: environment variable HOIST_NOT_SET is not set (write ${HOIST_NOT_SET:-default} for a default)",
            "job.yaml:3:1: duplicate key 'a' (first at line 1)",
        ])
    }

    @Test func mistakesAfterTheSyntaxErrorAreNotGuessedAt() {
        // libyaml cannot go on past a syntax error; what follows it is not reported.
        let text = "a: [1\nb: 2\nb: 3\n"
        let found = mistakes(text)
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix("job.yaml:2:") == true)
    }

    @Test func theParserHandsBackTheEventsBeforeItsError() {
        let parsed = YAMLParser.eventsUntilError(in: "a: 1\nb: [2\n", file: "f.yaml")
        #expect(parsed.error != nil)
        #expect(parsed.events.contains { $0.kind == .scalar(value: "a", anchor: nil, tag: nil, plain: true) })
        #expect(parsed.events.contains { $0.kind == .scalar(value: "2", anchor: nil, tag: nil, plain: true) })
        #expect(YAMLParser.eventsUntilError(in: "a: 1\n").error == nil)
    }
}
