// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
/*
 * queuekit/detail.hpp — configuration, thread-safety attributes and the layer's internals (errors, trampolines,
 *   deadlines, conditions); nothing here is part of the interface but the QK_ macros.
 * A part of <queuekit.hpp>: include that header, not this one.
 */
#ifndef QUEUEKIT_DETAIL_HPP
#define QUEUEKIT_DETAIL_HPP

#ifndef QUEUEKIT_HPP
#error "include <queuekit.hpp>, not <queuekit/detail.hpp>"
#endif

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <ratio>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

/* ---- Configuration ----------------------------------------------------------------------- */

/** 1 when the translation unit is compiled with C++ exceptions, 0 under -fno-exceptions. */
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define QK_CXX_EXCEPTIONS 1
#else
#define QK_CXX_EXCEPTIONS 0
#endif

#if defined(__has_attribute)
#define QK_CXX_HAS_ATTRIBUTE(x) __has_attribute(x)
#else
#define QK_CXX_HAS_ATTRIBUTE(x) 0
#endif

/** Clang thread-safety attributes, empty where the compiler lacks them. QK_GUARDED_BY(lock) and
 *  QK_PT_GUARDED_BY(lock) are for your data; the others annotate condition_lock. */
#if QK_CXX_HAS_ATTRIBUTE(capability)
#define QK_CAPABILITY(x)             __attribute__((capability(x)))
#define QK_GUARDED_BY(x)             __attribute__((guarded_by(x)))
#define QK_PT_GUARDED_BY(x)          __attribute__((pt_guarded_by(x)))
#define QK_ACQUIRE(...)              __attribute__((acquire_capability(__VA_ARGS__)))
#define QK_TRY_ACQUIRE(...)          __attribute__((try_acquire_capability(__VA_ARGS__)))
#define QK_RELEASE(...)              __attribute__((release_capability(__VA_ARGS__)))
#define QK_REQUIRES(...)             __attribute__((requires_capability(__VA_ARGS__)))
#define QK_EXCLUDES(...)             __attribute__((locks_excluded(__VA_ARGS__)))
#define QK_NO_THREAD_SAFETY_ANALYSIS __attribute__((no_thread_safety_analysis))
#else
#define QK_CAPABILITY(x)
#define QK_GUARDED_BY(x)
#define QK_PT_GUARDED_BY(x)
#define QK_ACQUIRE(...)
#define QK_TRY_ACQUIRE(...)
#define QK_RELEASE(...)
#define QK_REQUIRES(...)
#define QK_EXCLUDES(...)
#define QK_NO_THREAD_SAFETY_ANALYSIS
#endif

namespace qk {

/* ========================================================================================== */
/* Details: errors, trampolines, deadlines (not part of the interface)                       */
/* ========================================================================================== */

namespace detail {

/** Reports a failed throwing call: throws std::system_error naming `call`, or, without
 *  exceptions, prints that what() line and aborts. */
[[noreturn]] inline void fail(int status, const char *call) {
#if QK_CXX_EXCEPTIONS
    throw std::system_error(status, std::generic_category(), call);
#else
    std::fprintf(stderr, "%s: %s\n", call, std::generic_category().message(status).c_str());
    std::abort();
#endif
}

/** Misuse where nothing can be reported (noexcept members, destructors): one line, then
 *  std::terminate. */
[[noreturn]] inline void misuse(int status, const char *call) noexcept {
    std::fprintf(stderr, "%s: %s (%s)\n", call, qk_status_name(status), qk_strerror(status));
    std::terminate();
}

/** Sets `ec` from a status (clears it for 0). */
inline void set_status(std::error_code &ec, int status) noexcept {
    if (status == 0) {
        ec.clear();
    } else {
        ec.assign(status, std::generic_category());
    }
}

/** errno after a failed constructor call, never 0. */
inline int creation_status() noexcept {
    return errno != 0 ? errno : ENOMEM;
}

/** Every callable the layer passes to the C API starts with one of these: the one extern "C"
 *  trampoline below calls `invoke` with it. */
struct thunk {
    void (*invoke)(thunk *) noexcept;
};

/** The result of f() as R: without reference and cv qualifiers. */
template <class F, class... Args>
using result_t = std::remove_cv_t<std::remove_reference_t<std::invoke_result_t<F, Args...>>>;

/** What an error_code form returns for a result R: std::optional<R>, or void. */
template <class R>
using ec_result_t = std::conditional_t<std::is_void_v<R>, void, std::optional<R>>;

/** Where a synchronous call leaves its result. */
template <class R> struct slot {
    std::optional<R> value;
    template <class F> void fill(F &&f) {
        value.emplace(std::invoke(std::forward<F>(f)));
    }
    R take() {
        return std::move(*value);
    }
    std::optional<R> take_optional() {
        return std::move(value);
    }
};
template <> struct slot<void> {
    template <class F> void fill(F &&f) {
        std::invoke(std::forward<F>(f));
    }
    void take() {}
};

/** A synchronous call's context, on the caller's stack: the callable (by reference), its result
 *  and the exception it threw. */
template <class F, class R> struct sync_thunk : thunk {
    std::remove_reference_t<F> &f;
    slot<R> result;
#if QK_CXX_EXCEPTIONS
    std::exception_ptr error;
#endif
    explicit sync_thunk(std::remove_reference_t<F> &fn) noexcept : thunk{&run}, f(fn) {}
    static void run(thunk *t) noexcept {
        auto &self = *static_cast<sync_thunk *>(t);
#if QK_CXX_EXCEPTIONS
        try {
            self.result.fill(static_cast<F &&>(self.f));
        } catch (...) {
            self.error = std::current_exception();
        }
#else
        self.result.fill(static_cast<F &&>(self.f));
#endif
    }
    /** After the C call returned 0: rethrows what f threw. */
    void rethrow() {
#if QK_CXX_EXCEPTIONS
        if (error) std::rethrow_exception(std::move(error));
#endif
    }
};

/** An asynchronous call's context, on the heap: the decay-copied callable D, invoked once as an
 *  rvalue and destroyed right after, on the thread that ran it. */
template <class D> struct async_thunk : thunk {
    D f;
    template <class... Args>
    explicit async_thunk(Args &&...args) : thunk{&run}, f(std::forward<Args>(args)...) {}
    static void run(thunk *t) noexcept {
        auto *self = static_cast<async_thunk *>(t);
        std::invoke(std::move(self->f));
        delete self;
    }
};

/** A predicate's context for the condition tests of section 3a: `invoke` converts the value. */
struct test_thunk {
    bool (*invoke)(const test_thunk *, std::intptr_t) noexcept;
};

extern "C" {
/** The one trampoline through which every callable of this header reaches the C API. */
inline void qk_cxx_trampoline(void *context) noexcept {
    thunk *t = static_cast<thunk *>(context);
    t->invoke(t);
}
/** The trampoline of the predicates (a qk_condition_test_t). */
inline bool qk_cxx_test_trampoline(std::intptr_t condition, void *context) noexcept {
    const test_thunk *t = static_cast<const test_thunk *>(context);
    return t->invoke(t, condition);
}
}

/** A C submission bound to its handle: `submit(context, trampoline)` calls call(handle, ...). */
template <class Handle> struct submitter {
    Handle *handle;
    int (*call)(Handle *, void *, qk_function_t);
    int operator()(void *context, qk_function_t work) const noexcept {
        return call(handle, context, work);
    }
};

/** Runs f through `submit(context, trampoline)` (a synchronous C call); returns f's result or
 *  throws (the C call's error, named `call`, or what f threw). */
template <class F, class Submit> result_t<F> call_sync(const char *call, F &&f, Submit &&submit) {
    using R = result_t<F>;
    sync_thunk<F, R> t(f);
    int status = submit(static_cast<void *>(static_cast<thunk *>(&t)), &qk_cxx_trampoline);
    if (status != 0) fail(status, call);
    t.rethrow();
    return t.result.take();
}

/** As call_sync, setting `ec` instead of throwing the C call's error. */
template <class F, class Submit>
ec_result_t<result_t<F>> call_sync(std::error_code &ec, F &&f, Submit &&submit) {
    using R = result_t<F>;
    sync_thunk<F, R> t(f);
    int status = submit(static_cast<void *>(static_cast<thunk *>(&t)), &qk_cxx_trampoline);
    set_status(ec, status);
    if constexpr (std::is_void_v<R>) {
        if (status == 0) t.rethrow();
    } else {
        if (status != 0) return std::nullopt;
        t.rethrow();
        return t.result.take_optional();
    }
}

/** Decay-copies into a heap thunk of type D (constructed from `args`) and submits it; on refusal
 *  destroys it here. Returns the status (ENOMEM when the allocation failed). */
template <class D, class Submit, class... Args> int call_async(Submit &&submit, Args &&...args) {
    auto *t = new (std::nothrow) async_thunk<D>(std::forward<Args>(args)...);
    if (t == nullptr) return ENOMEM;
    int status = submit(static_cast<void *>(static_cast<thunk *>(t)), &qk_cxx_trampoline);
    if (status != 0) delete t;
    return status;
}

/* ---- Deadlines --------------------------------------------------------------------------- */

/** What a relative time of 2^62 ns (146 years) or more becomes: the saturated deadline. */
constexpr std::uint64_t far_ns = QK_FOREVER - 1;
/** The largest relative time converted exactly. */
constexpr long double exact_ns_limit = static_cast<long double>(std::uint64_t(1) << 62);

/** A positive duration in nanoseconds, rounded up; far_ns when it reaches 2^62 ns (no overflow
 *  on the way). */
template <class Rep, class Period>
std::uint64_t positive_ns(const std::chrono::duration<Rep, Period> &d) noexcept {
    long double approx = std::chrono::duration<long double, std::nano>(d).count();
    if (!(approx < exact_ns_limit)) return far_ns;
    if constexpr (std::is_floating_point_v<Rep> || std::ratio_less_v<Period, std::nano>) {
        long double whole = static_cast<long double>(static_cast<std::uint64_t>(approx));
        return static_cast<std::uint64_t>(whole) + (whole < approx ? 1 : 0);
    } else {
        return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::nanoseconds>(d).count());
    }
}

/** `base` + `relative`, saturated to QK_FOREVER - 1. */
inline std::uint64_t saturating_add(std::uint64_t base, std::uint64_t relative) noexcept {
    return relative >= QK_FOREVER - 1 - base ? QK_FOREVER - 1 : base + relative;
}

/** The absolute CLOCK_MONOTONIC deadline `d` from now: QK_FOREVER for exactly max(), 0 (already
 *  past: try once) for zero or negative. */
template <class Rep, class Period>
std::uint64_t deadline_after(const std::chrono::duration<Rep, Period> &d) noexcept {
    using duration = std::chrono::duration<Rep, Period>;
    if (d == duration::max()) return QK_FOREVER;
    if (!(d > duration::zero())) return 0;
    return saturating_add(qk_now_ns(), positive_ns(d));
}

/** The absolute CLOCK_MONOTONIC deadline of a time point of any clock. */
template <class Clock, class Duration>
std::uint64_t deadline_at(const std::chrono::time_point<Clock, Duration> &t) noexcept {
    using time_point = std::chrono::time_point<Clock, Duration>;
    if (t == time_point::max()) return QK_FOREVER;
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
        const auto since = t.time_since_epoch();
        if (!(since > Duration::zero())) return 0;
        return saturating_add(0, positive_ns(since));
    } else {
        const auto now = Clock::now();
        const std::uint64_t base = qk_now_ns();
        // Compared as long double nanoseconds first: t - now may not fit in the common type.
        using wide = std::chrono::duration<long double, std::nano>;
        const long double gap =
            wide(t.time_since_epoch()).count() - wide(now.time_since_epoch()).count();
        if (!(gap > 0)) return 0;
        if (!(gap < exact_ns_limit)) return far_ns;
        return saturating_add(base, positive_ns(t - now));
    }
}

/* ---- Conditions ---------------------------------------------------------------------------- */

/** E as the C condition: enums, integers and bool by value, other types bytewise. */
template <class E> std::intptr_t to_condition(const E &value) noexcept {
    if constexpr (std::is_enum_v<E> || std::is_integral_v<E>) {
        return static_cast<std::intptr_t>(value);
    } else {
        std::intptr_t bits = 0;
        std::memcpy(&bits, &value, sizeof(E));
        return bits;
    }
}

/** The C condition as E (the inverse of to_condition). */
template <class E> E from_condition(std::intptr_t condition) noexcept {
    if constexpr (std::is_enum_v<E>) {
        return static_cast<E>(static_cast<std::underlying_type_t<E>>(condition));
    } else if constexpr (std::is_same_v<E, bool>) {
        return condition != 0;
    } else if constexpr (std::is_integral_v<E>) {
        return static_cast<E>(condition);
    } else {
        alignas(E) unsigned char bytes[sizeof(E)];
        std::memcpy(bytes, &condition, sizeof(E));
        return *std::launder(reinterpret_cast<E *>(bytes));
    }
}

/** A predicate on E, seen by the C test trampoline. */
template <class E, class P> struct predicate_thunk : test_thunk {
    P &pred;
    explicit predicate_thunk(P &p) noexcept : test_thunk{&run}, pred(p) {}
    static bool run(const test_thunk *t, std::intptr_t condition) noexcept {
        auto &self = *static_cast<const predicate_thunk *>(t);
        return static_cast<bool>(std::invoke(self.pred, from_condition<E>(condition)));
    }
};

} // namespace detail
} // namespace qk

#endif /* QUEUEKIT_DETAIL_HPP */
