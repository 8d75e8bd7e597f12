import Foundation

/// What `os.getenv` shows a job's hooks: an allow-list, never the whole environment.
///
/// - the variables `lua.env` grants (and the deprecated `lua.secrets`), whole: the operator
///   named them;
/// - the default set, which holds no secrets: `HOME`, `USER`, `HOSTNAME`, `LANG`, `TZ`, `LC_*`;
/// - the keys of the manifest's `env:` that are not named like credentials (`HookBus.isSecret`),
///   with the credentials of any URL in their value hidden (`HookBus.redactingCredentials`),
///   and none at all when the value holds a hidden variable's value (`holdsAHiddenValue`).
///
/// Every other variable reads as nil: the process's own (`MYSQL_PWD`, a webhook URL with its
/// secret path, a JSON config), and every key of the `envFile:`, the place for secrets, unless
/// `env:` sets it again or `lua.env` grants it.
struct HookEnvironment: Sendable {
    /// Names every hook may read: where the job runs, in which language and time zone.
    static let defaultNames: Set<String> = ["HOME", "USER", "HOSTNAME", "LANG", "TZ"]
    /// The start of the locale's variables (`LC_ALL`, `LC_TIME`...), in the default set too.
    static let defaultPrefix = "LC_"

    private let environment: [String: String]
    private let lua: LuaSettings
    private let manifestNames: Set<String>
    private let envFileNames: Set<String>

    init(job: Job) {
        environment = job.environment
        lua = job.manifest.lua
        manifestNames = Set(job.manifest.env.keys)
        envFileNames = job.envFileNames
    }

    /// How a hook sees `name`: whole, with URL credentials hidden, or not at all.
    enum Visibility { case whole, redacted, hidden }

    func visibility(of name: String) -> Visibility {
        if lua.grants(name) { return .whole }
        if manifestNames.contains(name) { return HookBus.isSecret(name) ? .hidden : .redacted }
        if envFileNames.contains(name) { return .hidden }
        return Self.defaultNames.contains(name) || name.hasPrefix(Self.defaultPrefix) ? .whole : .hidden
    }

    /// `os.getenv(name)`: the value a hook may see, or nil.
    func value(_ name: String) -> String? {
        // No variable has a name of a kilobyte (and checking a huge one would take long).
        guard name.utf8.count <= 1024, let value = environment[name] else { return nil }
        switch visibility(of: name) {
        case .whole: return value
        case .redacted: return holdsAHiddenValue(value) ? nil : HookBus.redactingCredentials(value)
        case .hidden: return nil
        }
    }

    /// Whether `value` holds the value of a variable hooks may not read (an `env:` key built
    /// with `${MYSQL_PWD}`, in whatever shape: `password = '...'`, a nested JSON member): what
    /// is made of a hidden value is hidden too. Values under 6 characters are too common to tell.
    private func holdsAHiddenValue(_ value: String) -> Bool {
        environment.contains { name, hidden in
            hidden.utf8.count >= 6 && value.contains(hidden) && visibility(of: name) == .hidden
        }
    }
}
