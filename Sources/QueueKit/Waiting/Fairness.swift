// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

/// Eventual fairness, shared by the DB queue and the condition lock: a running thread may take
/// what a parked waiter waits for ahead of it, which spares the waiter's wake-up latency while
/// the resource sits idle, but only for a bounded time, after which the waiter is handed it.
enum Fairness {
    /// How long a parked waiter may be overtaken: 1 ms, in nanoseconds (Rust's parking_lot uses
    /// 0.5 ms). Long enough that the hand-offs it forces cost nothing measurable; short enough
    /// that a waiter's worst wait under a storm of newcomers stays near it.
    static let bound: UInt64 = 1_000_000
}
