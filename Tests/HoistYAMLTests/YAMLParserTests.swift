import Testing
@testable import HoistYAML

@Suite struct YAMLParserTests {
    @Test func parsesEventsWithOneBasedMarks() throws {
        let events = try YAMLParser.events(in: "name: photos\nfiles:\n  - root: /var/photos\n", file: "job.yaml")
        let scalars = events.compactMap { event -> (String, YAMLMark)? in
            if case .scalar(let value, _, _, _) = event.kind { return (value, event.start) }
            return nil
        }
        #expect(scalars.map(\.0) == ["name", "photos", "files", "root", "/var/photos"])
        #expect(scalars[0].1 == YAMLMark(line: 1, column: 1))
        #expect(scalars[1].1 == YAMLMark(line: 1, column: 7))
        #expect(scalars[3].1 == YAMLMark(line: 3, column: 5))
    }

    @Test func keepsAnchorsAndAliases() throws {
        let events = try YAMLParser.events(in: "a: &x 1\nb: *x\n")
        #expect(events.contains { $0.kind == .scalar(value: "1", anchor: "x", tag: nil, plain: true) })
        #expect(events.contains { $0.kind == .alias(anchor: "x") })
    }

    @Test func syntaxErrorNamesFileLineAndColumn() {
        #expect {
            try YAMLParser.events(in: "a: [1, 2\nb: 3\n", file: "jobs/bad.yaml")
        } throws: { error in
            let text = "\(error)"
            return text.hasPrefix("jobs/bad.yaml:2:") && text.contains("flow sequence")
        }
    }
}
