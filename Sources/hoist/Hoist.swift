import ArgumentParser

/// The `hoist` command.
@main
struct Hoist: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hoist",
        abstract: "Upload files to Cloud Storage, from the command line or from YAML jobs.",
        version: "0.1.0",
        subcommands: [Copy.self]
    )
}
