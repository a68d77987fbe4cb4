// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers

// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the exports carry the C names of include/queuekit.h)

import CQueueKit
import Glibc
import QueueKit
import QueueKitShim

// Section 3 of the C API: the condition lock. A `qk_condlock_t *` is a `ConditionLock<Int>`
// (`intptr_t` is `Int`). Argument checks and conversions only; the behaviour is the Swift type's.

/// The Swift type behind `qk_condlock_t`.
typealias CConditionLock = ConditionLock<Int>

/// Whether `handle` is a condition lock: its first word is the tag every `qk_condlock_create`
/// stores (0, matching no object, until the first).
@inline(__always)
private func isConditionLock(_ handle: OpaquePointer) -> Bool {
    let tag = qkshim_condlock_tag()
    return tag != 0 && UnsafeRawPointer(handle).loadUnaligned(as: UInt.self) == tag
}

/// The lock behind `handle`, and the calling thread's number, when the call may run plain: a
/// condition lock, none of the set-ups of ``SlowPaths`` on (ThreadSanitizer, the lock-order
/// witness, a forked child), outside a test of a condition, and a thread that has its number and
/// its record (``ConditionLock/acquireIfIdle(recording:deadline:plainBy:)``). `nil` sends the call
/// down the general path, which answers every case. The uncontended calls thus run as a short
/// inlined sequence with no call in it, and the general path is one call away (`@inline(never)`).
@inline(__always)
private func plainLock(_ handle: OpaquePointer?) -> (lock: Unmanaged<CConditionLock>, thread: UInt64)? {
    guard let handle, SlowPaths.areOff, qkshim_testing_lock() == nil, isConditionLock(handle) else { return nil }
    let thread = qkshim_thread_id_if_recorded()
    guard thread != 0 else { return nil }
    return (Unmanaged<CConditionLock>.fromOpaque(UnsafeRawPointer(handle)), thread)
}

@inline(__always)
private func condlockStatus(_ lock: OpaquePointer?, _ body: (CConditionLock) throws(QueueKitError) -> Void) -> Int32 {
    Handle.status(lock, as: CConditionLock.self, tagged: isConditionLock, body)
}

/// An acquisition's status: `EOWNERDEAD` instead of 0 when the lock's previous holder died
/// holding it (the lock is held either way; the Swift call succeeds and says so in
/// `previousOwnerDied`). The check is a load after the call, outside its closure, so that the
/// uncontended path stays inlined.
@inline(__always)
private func acquisitionStatus(_ lock: OpaquePointer?, _ body: (CConditionLock) throws(QueueKitError) -> Void) -> Int32
{
    let status = condlockStatus(lock, body)
    guard status == 0, let lock else { return status }
    // `condlockStatus` checked the handle's type.
    let ownerDied = Unmanaged<CConditionLock>.fromOpaque(UnsafeRawPointer(lock))._withUnsafeGuaranteedRef {
        $0.previousOwnerDied
    }
    return ownerDied ? EOWNERDEAD : 0
}

@_cdecl("qk_condlock_create") @implementation
public func qk_condlock_create(_ condition: Int) -> OpaquePointer? {
    Handle.created {
        qkshim_condlock_tag_set(UInt(bitPattern: unsafeBitCast(CConditionLock.self, to: UnsafeRawPointer.self)))
        return CConditionLock(condition: condition)
    }
}

@_cdecl("qk_condlock_destroy") @implementation
public func qk_condlock_destroy(_ lock: OpaquePointer?) -> Int32 {
    guard let lock else { return EINVAL }
    let status = condlockStatus(lock) { lock throws(QueueKitError) in
        guard lock.retireIfIdle() else { throw .busy }
    }
    if status == 0 { Handle.release(lock, as: CConditionLock.self) }
    return status
}

@_cdecl("qk_condlock_lock") @implementation
public func qk_condlock_lock(_ lock: OpaquePointer?) -> Int32 {
    // The uncontended acquisition needs a lock with no news (a state word of 0): no EOWNERDEAD.
    if let (object, thread) = plainLock(lock),
        object._withUnsafeGuaranteedRef({ $0.acquireIfIdle(recording: "qk_condlock_lock", plainBy: thread) })
    {
        return 0
    }
    return lockInGeneral(lock)
}

@inline(never)
private func lockInGeneral(_ lock: OpaquePointer?) -> Int32 {
    acquisitionStatus(lock) { lock throws(QueueKitError) in try lock.lock(call: "qk_condlock_lock") }
}

@_cdecl("qk_condlock_trylock") @implementation
public func qk_condlock_trylock(_ lock: OpaquePointer?) -> Int32 {
    acquisitionStatus(lock) { lock throws(QueueKitError) in try lock.tryLock(call: "qk_condlock_trylock") }
}

@_cdecl("qk_condlock_lock_until") @implementation
public func qk_condlock_lock_until(_ lock: OpaquePointer?, _ deadline: UInt64) -> Int32 {
    acquisitionStatus(lock) { lock throws(QueueKitError) in
        try lock.lock(before: deadline, call: "qk_condlock_lock_until")
    }
}

@_cdecl("qk_condlock_lock_when") @implementation
public func qk_condlock_lock_when(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    if let (object, thread) = plainLock(lock),
        object._withUnsafeGuaranteedRef({
            $0.acquireIfIdle(when: condition, recording: "qk_condlock_lock_when", plainBy: thread)
        })
    {
        return 0
    }
    return lockWhenInGeneral(lock, condition)
}

@inline(never)
private func lockWhenInGeneral(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    // Not `lock(whenCondition:call:)`, which would try the uncontended path a second time.
    acquisitionStatus(lock) { lock throws(QueueKitError) in
        try lock.lock(whenCondition: condition, before: MonotonicClock.forever, call: "qk_condlock_lock_when")
    }
}

@_cdecl("qk_condlock_trylock_when") @implementation
public func qk_condlock_trylock_when(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    acquisitionStatus(lock) { lock throws(QueueKitError) in
        try lock.tryLock(whenCondition: condition, call: "qk_condlock_trylock_when")
    }
}

@_cdecl("qk_condlock_lock_when_until") @implementation
public func qk_condlock_lock_when_until(_ lock: OpaquePointer?, _ condition: Int, _ deadline: UInt64) -> Int32 {
    acquisitionStatus(lock) { lock throws(QueueKitError) in
        try lock.lock(whenCondition: condition, before: deadline, call: "qk_condlock_lock_when_until")
    }
}

@_cdecl("qk_condlock_unlock") @implementation
public func qk_condlock_unlock(_ lock: OpaquePointer?) -> Int32 {
    if let (object, thread) = plainLock(lock) {
        return object._withUnsafeGuaranteedRef { $0.unlockIfHeld(plainBy: thread) } ? 0 : EPERM
    }
    return unlockInGeneral(lock)
}

@inline(never)
private func unlockInGeneral(_ lock: OpaquePointer?) -> Int32 {
    condlockStatus(lock) { lock throws(QueueKitError) in try lock.unlock() }
}

@_cdecl("qk_condlock_unlock_with") @implementation
public func qk_condlock_unlock_with(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    if let (object, thread) = plainLock(lock) {
        return object._withUnsafeGuaranteedRef { $0.unlockIfHeld(setting: condition, plainBy: thread) } ? 0 : EPERM
    }
    return unlockWithInGeneral(lock, condition)
}

@inline(never)
private func unlockWithInGeneral(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    condlockStatus(lock) { lock throws(QueueKitError) in try lock.unlock(withCondition: condition) }
}

@_cdecl("qk_condlock_set") @implementation
public func qk_condlock_set(_ lock: OpaquePointer?, _ condition: Int) -> Int32 {
    condlockStatus(lock) { lock throws(QueueKitError) in try lock.set(condition, call: "qk_condlock_set") }
}

@_cdecl("qk_condlock_check_held") @implementation
public func qk_condlock_check_held(_ lock: OpaquePointer?) -> Int32 {
    condlockStatus(lock) { lock throws(QueueKitError) in
        guard lock.isHeldByCurrentThread else { throw .notPermitted }
    }
}

@_cdecl("qk_condlock_owner_died") @implementation
public func qk_condlock_owner_died(_ lock: OpaquePointer?) -> Int32 {
    Handle.borrow(lock, as: CConditionLock.self, tagged: isConditionLock, otherwise: 0) { $0.previousOwnerDied ? 1 : 0 }
}

@_cdecl("qk_condlock_condition") @implementation
public func qk_condlock_condition(_ lock: OpaquePointer?) -> Int {
    // Inside a test: the value under test of the lock under test (its guard is this thread's);
    // any other lock's guard is not to be waited for there.
    if _slowPath(ConditionTesting.isRunning),
        ConditionTesting.lockUnderTest != lock.map({ UnsafeRawPointer($0) })
    {
        return 0
    }
    return Handle.borrow(lock, as: CConditionLock.self, tagged: isConditionLock, otherwise: 0) { $0.condition }
}

@_cdecl("qk_condlock_set_name") @implementation
public func qk_condlock_set_name(_ lock: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    condlockStatus(lock) { lock throws(QueueKitError) in try lock.setName(copying: name) }
}

@_cdecl("qk_condlock_name") @implementation
public func qk_condlock_name(_ lock: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.borrow(lock, as: CConditionLock.self, tagged: isConditionLock, otherwise: CString.empty) { $0.cName }
}

@_cdecl("qk_condlock_get_stats") @implementation
public func qk_condlock_get_stats(_ lock: OpaquePointer?, _ stats: UnsafeMutablePointer<qk_condlock_stats_t>?) -> Int32
{
    guard let stats else { return EINVAL }
    return condlockStatus(lock) { lock throws(QueueKitError) in
        // size_t arrives as Int: read it unsigned, or a huge size (SIZE_MAX) would be negative.
        let size = UInt(bitPattern: stats.pointee.size)
        guard size >= StatsField.acquisitions.end else { throw .invalidArgument }
        let snapshot = lock.stats
        let values: [(StatsField, UInt64)] = [
            (.acquisitions, snapshot.acquisitions), (.contended, snapshot.contended),
            (.wakeups, snapshot.wakeups), (.futileWakeups, snapshot.futileWakeups),
            (.timeouts, snapshot.timeouts), (.abandonments, snapshot.abandonments),
        ]
        let base = UnsafeMutableRawPointer(stats)
        for (field, value) in values where size >= field.end {
            base.storeBytes(of: value, toByteOffset: field.offset, as: UInt64.self)
        }
    }
}

/// The counters of `qk_condlock_stats_t` by position, so a caller compiled against an older,
/// shorter struct gets only the fields it has room for.
private enum StatsField {
    case acquisitions, contended, wakeups, futileWakeups, timeouts, abandonments

    var offset: Int {
        switch self {
        case .acquisitions: MemoryLayout<qk_condlock_stats_t>.offset(of: \.acquisitions)!
        case .contended: MemoryLayout<qk_condlock_stats_t>.offset(of: \.contended)!
        case .wakeups: MemoryLayout<qk_condlock_stats_t>.offset(of: \.wakeups)!
        case .futileWakeups: MemoryLayout<qk_condlock_stats_t>.offset(of: \.futile_wakeups)!
        case .timeouts: MemoryLayout<qk_condlock_stats_t>.offset(of: \.timeouts)!
        case .abandonments: MemoryLayout<qk_condlock_stats_t>.offset(of: \.abandonments)!
        }
    }

    /// The smallest `size` that holds the field.
    var end: UInt { UInt(offset + MemoryLayout<UInt64>.size) }
}

// MARK: Waits on a test of the condition

/// Runs `body` with the Swift form of the C test `test(condition, context)` and its identity.
@inline(__always)
private func withTest(
    _ test: qk_condition_test_t, _ context: UnsafeMutableRawPointer?,
    _ body: ((Int) -> Bool, ConditionTestIdentity) throws(QueueKitError) -> Void
) throws(QueueKitError) {
    let function = unsafeBitCast(test, to: UnsafeRawPointer.self)
    let identity = ConditionTestIdentity(function: function, context: context)
    // The test runs on other threads too: ThreadSanitizer learns that they read what this one
    // wrote before the call, and that they are done before it returns.
    let token = context.map { UnsafeRawPointer($0) } ?? function
    ThreadSanitizer.conditionTestPublished(token)
    defer { ThreadSanitizer.conditionTestFinished(token) }
    try body(
        { value in
            ThreadSanitizer.conditionTestEvaluating(token)
            defer { ThreadSanitizer.conditionTestEvaluated(token) }
            return test(value, context)
        }, identity)
}

@_cdecl("qk_condlock_lock_if") @implementation
public func qk_condlock_lock_if(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let test else { return EINVAL }
    return acquisitionStatus(lock) { lock throws(QueueKitError) in
        try withTest(test, context) { test, identity throws(QueueKitError) in
            try lock.lock(
                where: test, identity: identity, deadline: MonotonicClock.forever, isTry: false,
                call: "qk_condlock_lock_if")
        }
    }
}

@_cdecl("qk_condlock_trylock_if") @implementation
public func qk_condlock_trylock_if(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let test else { return EINVAL }
    return acquisitionStatus(lock) { lock throws(QueueKitError) in
        try withTest(test, context) { test, identity throws(QueueKitError) in
            try lock.lock(where: test, identity: identity, deadline: 0, isTry: true, call: "qk_condlock_trylock_if")
        }
    }
}

@_cdecl("qk_condlock_lock_if_until") @implementation
public func qk_condlock_lock_if_until(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?, _ deadline: UInt64
) -> Int32 {
    guard let test else { return EINVAL }
    return acquisitionStatus(lock) { lock throws(QueueKitError) in
        try withTest(test, context) { test, identity throws(QueueKitError) in
            try lock.lock(
                where: test, identity: identity, deadline: deadline, isTry: false, call: "qk_condlock_lock_if_until")
        }
    }
}

/// `await`'s status: `EOWNERDEAD` when the lock it was handed back had been abandoned (only then:
/// an `await` whose test held at once released nothing and acquired nothing).
@inline(__always)
private func awaitStatus(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?, _ deadline: UInt64,
    call: StaticString
) -> Int32 {
    guard let test else { return condlockStatus(lock) { _ throws(QueueKitError) in throw .invalidArgument } }
    var reacquired = false
    let status = condlockStatus(lock) { lock throws(QueueKitError) in
        try withTest(test, context) { test, identity throws(QueueKitError) in
            reacquired = try lock.wait(until: test, identity: identity, deadline: deadline, call: call)
        }
    }
    guard status == 0, reacquired, let lock else { return status }
    let ownerDied = Unmanaged<CConditionLock>.fromOpaque(UnsafeRawPointer(lock))._withUnsafeGuaranteedRef {
        $0.previousOwnerDied
    }
    return ownerDied ? EOWNERDEAD : 0
}

@_cdecl("qk_condlock_await") @implementation
public func qk_condlock_await(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    awaitStatus(lock, test, context, MonotonicClock.forever, call: "qk_condlock_await")
}

@_cdecl("qk_condlock_await_until") @implementation
public func qk_condlock_await_until(
    _ lock: OpaquePointer?, _ test: qk_condition_test_t?, _ context: UnsafeMutableRawPointer?, _ deadline: UInt64
) -> Int32 {
    awaitStatus(lock, test, context, deadline, call: "qk_condlock_await_until")
}
