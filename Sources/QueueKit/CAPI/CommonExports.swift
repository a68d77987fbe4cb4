import CQueueKit
import QueueKitShim

// The general conventions of the C API: version, status text, clock. No logic of their own.

@_cdecl("qk_version") @implementation @_spi(CAPI)
public func qk_version() -> UnsafePointer<CChar>? {
    CString.literal(QueueKitVersion.string)
}

@_cdecl("qk_version_number") @implementation @_spi(CAPI)
public func qk_version_number() -> Int32 {
    Int32(QueueKitVersion.number)
}

@_cdecl("qk_strerror") @implementation @_spi(CAPI)
public func qk_strerror(_ status: Int32) -> UnsafePointer<CChar>? {
    qkshim_status_description(status)
}

@_cdecl("qk_status_name") @implementation @_spi(CAPI)
public func qk_status_name(_ status: Int32) -> UnsafePointer<CChar>? {
    qkshim_status_name(status)
}

@_cdecl("qk_now_ns") @implementation @_spi(CAPI)
public func qk_now_ns() -> UInt64 {
    MonotonicClock.now()
}
