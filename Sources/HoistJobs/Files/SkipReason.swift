/// Why a file of a plan is not uploaded. The run's tally counts each kind apart (`JobSummary`),
/// and observers hear its `description`, the words `hoist plan` and `--json` show.
public enum SkipReason: Sendable, Hashable, CustomStringConvertible {
    /// Not matched by the file set's `include` globs.
    case notIncluded
    /// Matched by one of the file set's `exclude` globs (the glob as written).
    case excluded(String)
    case smallerThanMinSize
    case largerThanMaxSize
    case newerThanMinAge
    /// The journal knows it uploaded with the same size, time and metadata.
    case unchanged
    /// A `before_upload` hook answered `false`.
    case vetoed
    /// The object exists and the job says `upload.noClobber`.
    case exists

    /// Left out by the file set's filters (`include`, `exclude`, sizes, age): "not included" in
    /// the summary, unless another file set of the job takes the file.
    public var isFilter: Bool {
        switch self {
        case .notIncluded, .excluded, .smallerThanMinSize, .largerThanMaxSize, .newerThanMinAge: true
        case .unchanged, .vetoed, .exists: false
        }
    }

    public var description: String {
        switch self {
        case .notIncluded: "not included"
        case .excluded(let glob): "excluded by \(glob)"
        case .smallerThanMinSize: "smaller than minSize"
        case .largerThanMaxSize: "larger than maxSize"
        case .newerThanMinAge: "modified less than minAge ago"
        case .unchanged: "unchanged since the last upload"
        case .vetoed: "skipped by before_upload"
        case .exists: "the object exists (no-clobber)"
        }
    }
}
