// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The C face's fast paths: a read or a write of C work, inlined whole into `qk_dbqueue_read` and
/// `qk_dbqueue_write`.
///
/// Both run plain (``SlowPaths``): the same steps as the general path (`enterRead`, `enterWrite`,
/// `withAccess` behind the C face's status checks), with the checks that cannot apply folded away.
/// The C face sends a call down the general path when the slow paths are on or a test of a
/// condition runs on the calling thread.
extension DBQueue {
    /// A nested read from C, before its handle is even checked: the calling thread's innermost
    /// frame is a block of the DB queue `handle` (its identity queue's owner, so the frame proves
    /// the handle alive and of the right type without reading it), and the read may run plain.
    /// Then `function(context)` runs right here, and true is returned; false, having done nothing,
    /// for every other case (a read nested further out, through another queue's block, takes the
    /// general path's walk).
    ///
    /// Such a read runs in no frame of its own: the innermost frame already says that the thread
    /// holds the queue (shared, or exclusively for a write), and a frame of it inside would add
    /// nothing anyone reads. Every hold is the strongest along the chain, ``Queue/current`` and
    /// the dispatch queue current are the same, a wait report lists a queue once, and a plain
    /// call has neither the witness, which counts blocks, nor the sanitizer to tell.
    @inlinable @inline(__always)
    package static func readInline(
        _ handle: UnsafeRawPointer, _ context: UnsafeMutableRawPointer?, _ function: CFunction
    ) -> Bool {
        guard let frame = ExecutionContext.innermostBlock else { return false }
        // The bit patterns: `handle` is not nil, so equal ones mean the same object (and compare
        // as one instruction, where optionals take several).
        let owner = UInt(bitPattern: frame.pointee.running._withUnsafeGuaranteedRef { $0.identityOwner })
        guard owner == UInt(bitPattern: handle), SlowPaths.areOff, qkshim_testing_lock() == nil else { return false }
        function(context)
        return true
    }

    /// A plain read (`exclusive` false) or write of C work: `work(context)` with that access; the
    /// status (0, or the error's code).
    @inlinable @inline(__always)
    package func runPlain(
        exclusive: Bool, _ context: UnsafeMutableRawPointer?, _ work: CFunction, call: StaticString
    ) -> Int32 {
        do throws(QueueKitError) {
            let access = try exclusive ? enterWrite(call: call, plain: true) : enterRead(call: call, plain: true)
            withAccess(access, plain: true) { work(context) }
            return 0
        } catch {
            return error.rawValue
        }
    }
}
