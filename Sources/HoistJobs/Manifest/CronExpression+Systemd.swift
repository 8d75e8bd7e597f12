/// The schedule as systemd timers write it (`hoist systemd`).
extension CronExpression {
    /// systemd calendar expressions that together fire when cron would. Cron runs a job whose
    /// day of month and day of week are both restricted (neither starts with `*`) on either
    /// day; a calendar expression means both: such a schedule gives two.
    public var systemdCalendars: [String] {
        let schedule = self
        let expanded = Self.shorthands[schedule.text.trimmingCharacters(in: .whitespaces).lowercased()] ?? schedule.text
        let raw = expanded.split(separator: " ", omittingEmptySubsequences: true)
        let specs = Self.specs
        func list(_ index: Int) -> String { Self.values(schedule.fields[index], full: specs[index].range) }
        let time = "\(list(1)):\(list(0)):00"
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let weekdays = schedule.fields[4].count == 7 ? nil : Self.runs(schedule.fields[4].sorted()).map { run in
            run.count == 1 ? days[run[0]] : "\(days[run.first!])..\(days[run.last!])"
        }.joined(separator: ",")
        let dayOfMonthIsStar = raw[2].hasPrefix("*"), dayOfWeekIsStar = raw[4].hasPrefix("*")
        if dayOfMonthIsStar || dayOfWeekIsStar {
            return [(weekdays.map { $0 + " " } ?? "") + "*-\(list(3))-\(list(2)) \(time)"]
        }
        return ["*-\(list(3))-\(list(2)) \(time)", (weekdays.map { $0 + " " } ?? "") + "*-\(list(3))-* \(time)"]
    }

    /// `*` for every value of the field, else the values, runs of three or more as `a..b`.
    private static func values(_ set: Set<Int>, full: ClosedRange<Int>) -> String {
        if set.count == full.count { return "*" }
        return Self.runs(set.sorted()).flatMap { run in run.count >= 3 ? ["\(run.first!)..\(run.last!)"] : run.map(String.init) }
            .joined(separator: ",")
    }

    /// Sorted values cut into runs of consecutive ones.
    private static func runs(_ sorted: [Int]) -> [[Int]] {
        var result: [[Int]] = []
        for value in sorted {
            if let last = result.last?.last, last + 1 == value { result[result.count - 1].append(value) } else { result.append([value]) }
        }
        return result
    }
}
