/// The files a file set's filters left out that another file set may take: a job whose sets
/// share a root (`*.jpg` to one prefix, `*.txt` to another) must not count as "not included" a
/// file another set uploaded, nor count a file twice that both left out. A file below no other
/// set's root is told at once (`hold` is false); one below another's waits for the walk's end.
/// Memory: the items held, and the path of each file taken below another set's root.
struct LeftOut {
    /// Each file set's root, absolute.
    let roots: [String]
    private var held: [(PlanItem, SkipReason)] = []
    private var heldPaths: Set<Bytewise> = []   // paths are bytes: NFC and NFD twins are two files
    private var takenPaths: Set<Bytewise> = []

    init(roots: [String]) {
        self.roots = roots
    }

    /// Keeps a file its set left out when another set's root holds it (then true).
    mutating func hold(_ item: PlanItem, _ reason: SkipReason) -> Bool {
        guard underAnotherRoot(item) else { return false }
        if heldPaths.insert(Bytewise(item.file.path)).inserted { held.append((item, reason)) }
        return true
    }

    /// A file a set took (to upload, or skipped for another reason than its filters).
    mutating func taken(_ item: PlanItem) {
        if underAnotherRoot(item) { takenPaths.insert(Bytewise(item.file.path)) }
    }

    /// The files held that no set took, in walk order, once each.
    func notTaken() -> [(PlanItem, SkipReason)] {
        held.filter { !takenPaths.contains(Bytewise($0.0.file.path)) }
    }

    private func underAnotherRoot(_ item: PlanItem) -> Bool {
        guard roots.count > 1 else { return false }
        let path = item.file.path
        return roots.indices.contains { index in
            guard index != item.fileSetIndex else { return false }
            let root = roots[index]
            return path == root || path.hasPrefix(root == "/" ? "/" : root + "/")
        }
    }
}
