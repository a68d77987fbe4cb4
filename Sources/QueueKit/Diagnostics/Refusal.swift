// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// A wait the deadlock detector refused: it would have closed a cycle of waiting threads. The
/// report names the ring.
///
/// Returned by ``WaitRegistry/enter(_:call:target:deadline:frame:refusable:stamped:holderMayWait:)``
/// with the wait already withdrawn. Non-copyable, and the caller must consume it exactly once:
/// ``deliver()`` when the call gives up (the deadlock handler gets the report on the refused
/// thread), ``drop()`` when a hand-off that raced with the search won after all. Forgetting both
/// stops a debug build.
///
/// Thread safety: owned by the refused thread.
struct Refusal: ~Copyable {
    /// The report, boxed: `discard self` needs trivially destroyed storage.
    private let box: Unmanaged<ReportBox>

    init(report: String) { box = Unmanaged.passRetained(ReportBox(report)) }

    /// The call gives up: the deadlock handler gets the report, on this thread.
    consuming func deliver() {
        let report = box.takeRetainedValue().report
        discard self
        Diagnostics.deadlockHandler.call(report)
    }

    /// The wait was granted after all: nothing to report.
    consuming func drop() {
        box.release()
        discard self
    }

    deinit {
        box.release()
        assertionFailure("QueueKit: a refused wait was neither delivered nor dropped")
    }
}

private final class ReportBox {
    let report: String
    init(_ report: String) { self.report = report }
}
