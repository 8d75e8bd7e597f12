import ArgumentParser
import Foundation
import HoistHTTP
import HoistJobs

extension Hoist {
    /// `hoist plugins [JOB]`: the plugins a job's hooks can name, with their settings.
    struct Plugins: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the plugins hooks can name, with their settings.",
            discussion: """
                A job uses one as: hooks: [{ plugin: NAME, with: { SETTING: VALUE } }]. Plugins are \
                found in $HOIST_PLUGIN_PATH (folders, colon-separated), in plugins/ beside the \
                manifest, in share/hoist/plugins beside hoist's folder, in the plugins/ of the \
                source checkout hoist was built in, then in /usr/local/share/hoist/plugins and \
                /usr/share/hoist/plugins. Each documents its settings in its header \
                ("-- setting NAME (TYPE): help").
                """
        )

        @Argument(help: "A job manifest: also look in plugins/ beside it, with its env:.", completion: .file(extensions: ["yaml", "yml"]))
        var job: String?

        func run() throws {
            let job = try self.job.map(loadJob)
            let environment = job?.environment ?? ProcessInfo.processInfo.environment
            let plugins = PluginCatalog.all(for: job, environment: environment)
            guard !plugins.isEmpty else {
                print(printable("No plugins found in: " + PluginCatalog.directories(for: job, environment: environment).joined(separator: ", ")))
                return
            }
            for plugin in plugins {
                print(printable("\(plugin.name): \(plugin.summary)"))
                print(printable("  \(plugin.path)"))
                for setting in plugin.settings {
                    print(printable("  with \(setting.name) (\(setting.type)\(setting.required ? ", required" : "")): \(setting.help)"))
                }
                for read in plugin.reads {
                    print(printable("  reads env: \(read.name) (only if lua.env grants it)"))
                }
            }
        }
    }
}
