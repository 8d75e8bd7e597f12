import Foundation
@testable import HoistJobs
import HoistStorage
import Testing

/// The admission step of a run, its I/O answered by closures: no-clobber, `before_upload`, the
/// journal asked again for a new destination, two files sent to one object.
@Suite struct AdmissionTests {
    static func item(_ path: String, to destination: String) -> PlanItem {
        PlanItem(file: WalkedFile(path: "/src/" + path, relativePath: path, size: 10, modified: Date(timeIntervalSince1970: 0)),
                 destination: destination, attributes: ObjectResource(), decision: .upload, fileSetIndex: 0)
    }

    static func admission(noClobber: Bool = false, stored: Set<String> = [], hook: ((PlanItem) throws -> PlanItem)? = nil,
                          journalKnows: Set<String> = [], consulted: @escaping (String) -> Void = { _ in },
                          stopping: @escaping () -> Bool = { false }) -> Admission {
        Admission(noClobber: noClobber, objectExists: { stored.contains($0) }, beforeUpload: hook.map { hook in { try hook($0) } },
                  rewrites: hook != nil, consultJournal: { item in
                      consulted(item.destination)
                      if journalKnows.contains(item.destination) { item.decision = .skip(.unchanged) }
                  }, isStopping: stopping)
    }

    @Test func noClobberSkipsAStoredObjectBeforeAnyHookIsAsked() async {
        var asked: [String] = []
        var admission = Self.admission(noClobber: true, stored: ["a"], hook: { asked.append($0.destination); return $0 })
        guard case .skip(_, .exists) = await admission.admit(Self.item("a", to: "a")) else { Issue.record("not skipped"); return }
        guard case .upload = await admission.admit(Self.item("b", to: "b")) else { Issue.record("not uploaded"); return }
        #expect(asked == ["b"])
    }

    @Test func aHooksVetoAndAHooksErrorAreTheirOwnVerdicts() async {
        struct Refused: Error, CustomStringConvertible { var description: String { "before_upload failed: no" } }
        var admission = Self.admission(hook: { item in
            if item.destination == "veto" { var vetoed = item; vetoed.decision = .skip(.vetoed); return vetoed }
            if item.destination == "error" { throw Refused() }
            return item
        })
        guard case .skip(_, .vetoed) = await admission.admit(Self.item("v", to: "veto")) else { Issue.record("not vetoed"); return }
        guard case .fail(_, let message) = await admission.admit(Self.item("e", to: "error")) else { Issue.record("not failed"); return }
        #expect(message == "before_upload failed: no")
    }

    @Test func aNewDestinationIsLookedUpInTheJournalAgain() async {
        var consulted: [String] = []
        let renamed = PlanItem(file: Self.item("x", to: "x").file, destination: "renamed/x", attributes: ObjectResource(), decision: .upload,
                               fileSetIndex: 0)
        var admission = Self.admission(hook: { $0.destination == "x" ? renamed : $0 }, journalKnows: ["renamed/x"],
                                       consulted: { consulted.append($0) })
        guard case .skip(let item, .unchanged) = await admission.admit(Self.item("x", to: "x")) else { Issue.record("not unchanged"); return }
        #expect(item.destination == "renamed/x")
        guard case .upload = await admission.admit(Self.item("y", to: "y")) else { Issue.record("not uploaded"); return }
        #expect(consulted == ["renamed/x"])
    }

    @Test func twoFilesSentToOneObjectByAHookFailTheSecond() async {
        var admission = Self.admission(hook: { item in
            PlanItem(file: item.file, destination: "same", attributes: item.attributes, decision: .upload, fileSetIndex: 0)
        })
        guard case .upload = await admission.admit(Self.item("a", to: "a")) else { Issue.record("first not uploaded"); return }
        guard case .fail(_, let message) = await admission.admit(Self.item("b", to: "b")) else { Issue.record("second not failed"); return }
        #expect(message == "/src/a and /src/b both go to 'same' after before_upload: nothing uploaded for the second")
    }

    @Test func aRunStoppedWhileTheHookRanStartsNothing() async {
        var stopped = false
        var admission = Self.admission(hook: { stopped = true; return $0 }, stopping: { stopped })
        guard case .stopped = await admission.admit(Self.item("a", to: "a")) else { Issue.record("started"); return }
    }
}
