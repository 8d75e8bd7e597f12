import ArgumentParser
import CHoistSystem
import Foundation
import HoistHTTP
import HoistLua
import HoistStorage
import HoistYAML

/// The `hoist` command.
@main
struct Hoist: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hoist",
        abstract: "Upload files to Cloud Storage, from the command line or from YAML jobs.",
        version: "\(String(cString: hoist_version())) (libcurl \(CurlEngine.libraryVersion), Lua \(LuaRuntime.libraryVersion), libyaml \(YAMLParser.libraryVersion))",
        subcommands: [Run.self, Watch.self, Validate.self, Plan.self, Status.self, Cron.self, Systemd.self, Copy.self, Plugins.self]
    )

    /// Exit statuses: 0 all done, 1 some files failed, 2 could not start (usage, setup).
    static func main() async {
        var parsed: (any ParsableCommand.Type)?
        do {
            var command = try parseAsRoot()
            parsed = type(of: command)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .success || error is ExitCode { exit(withError: error) }
            // Usage and validation errors, which ArgumentParser would end with 64: Hoist's 2. One
            // found while a subcommand ran (a value it checks itself) comes with its usage.
            let message = parsed.map { type in
                type.fullMessage(for: error)
                    .replacingOccurrences(of: "Usage: \(type._commandName) ", with: "Usage: hoist \(type._commandName) ")
                    .replacingOccurrences(of: "See '\(type._commandName) --help'", with: "See 'hoist \(type._commandName) --help'")
            } ?? fullMessage(for: error)
            printError(message)
            Foundation.exit(2)
        }
    }
}
