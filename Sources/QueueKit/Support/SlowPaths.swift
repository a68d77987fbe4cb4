// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import QueueKitShim

/// The process-wide set-ups that QueueKit's calls must take into account on their way, tested
/// together: ThreadSanitizer to inform (``ThreadSanitizer``), the lock-order witness on
/// (``LockOrder``), a forked child (``Fork``).
///
/// Each keeps its own flag, which the general paths read where they need it; the shim also keeps
/// a bit per set-up in one byte (`qkshim_slow_paths`), set by the set-up itself. A fast path loads
/// that byte once as its call begins and, when it is 0, runs the call *plain*: the same code with
/// every check these set-ups call for folded away (a `plain` argument, a constant at each call
/// site). A set-up that turns on while a plain call runs (the witness is the only one that can)
/// is not told about that call, as if the call had begun before it.
@usableFromInline
package enum SlowPaths {
    /// None of the set-ups is on: a call that begins now may run plain. One load and one branch.
    @inlinable @inline(__always)
    package static var areOff: Bool { qkshim_slow_paths_off() }
}
