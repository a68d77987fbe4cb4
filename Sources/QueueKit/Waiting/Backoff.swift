// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

import Glibc
import QueueKitShim

/// The backoff of a busy wait for another thread's step of a few instructions (a spin guard, a
/// pinned record, a submitter between its two stores, the thread adopting a fork): a CPU hint for
/// the first polls, then the CPU yielded, because the other thread may be preempted (more
/// runnable threads than CPUs) and must get to run. Waits that can last longer park instead
/// (``Parker``, whose spin policy is ``Parker/spin(until:pureSpin:_:)``).
struct Backoff {
    /// Polls with a CPU hint before yielding.
    static let hintedPolls: UInt32 = 64

    private var polls: UInt32 = 0

    /// Waits a little before the next poll.
    @inline(__always)
    mutating func pause() {
        polls &+= 1
        if polls < Self.hintedPolls { qkshim_cpu_relax() } else { sched_yield() }
    }
}
