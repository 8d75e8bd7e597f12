import Foundation

/// A line of `--json` output that does not follow schema/events.schema.json.
public struct EventSchemaError: Error, CustomStringConvertible {
    public let description: String
}

/// Validates each JSON line of `output` against the schema; returns the events' names.
public func validateEvents(_ output: String) throws -> [String] {
    let schema = packageRoot.appendingPathComponent("schema/events.schema.json").path
    let folder = try TemporaryDirectory()
    let lines = try folder.write("events.jsonl", Data(output.utf8)).path
    let check = try runProcess(testPython, testPythonArguments + ["-c", """
        import json, sys, jsonschema
        schema = json.load(open(sys.argv[1]))
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for line in open(sys.argv[2]).read().splitlines():
            event = json.loads(line)
            errors = sorted(validator.iter_errors(event), key=str)
            if errors:
                sys.exit("invalid: " + line + ": " + errors[0].message)
            print(event["event"])
        """, schema, lines])
    guard check.status == 0 else { throw EventSchemaError(description: check.stderr) }
    withExtendedLifetime(folder) {}
    return check.stdout.split(separator: "\n").map(String.init)
}
