// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// qk::queue: values, identity, every submission with void, move-only and reference results,
// exceptions carried back, EDEADLK as std::system_error, async callables' lifetimes.
#include <queuekit.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>

#include "check.hpp"

namespace {

/** Records where its one live instance was invoked and destroyed (moved-from copies ignored). */
struct tracker {
    struct log {
        std::atomic<int> invoked{0}, destroyed{0};
        std::thread::id ran_on, destroyed_on;
        check::signal done;
    };
    log *record;
    bool live = true;
    explicit tracker(log *r) : record(r) {}
    tracker(tracker &&other) noexcept
        : record(other.record), live(std::exchange(other.live, false)) {}
    tracker(const tracker &) = delete;
    ~tracker() {
        if (!live) return;
        record->destroyed_on = std::this_thread::get_id();
        record->destroyed++;
        record->done.notify();
    }
    void operator()() && {
        record->ran_on = std::this_thread::get_id();
        record->invoked++;
    }
};

} // namespace

// The value semantics section 8 fixes.
static_assert(std::is_nothrow_copy_constructible_v<qk::queue> &&
              std::is_nothrow_move_constructible_v<qk::queue>);
static_assert(std::is_nothrow_copy_assignable_v<qk::queue> &&
              std::is_nothrow_move_assignable_v<qk::queue>);
static_assert(std::is_nothrow_default_constructible_v<qk::queue>);
static_assert(!std::is_convertible_v<const char *, qk::queue>); // explicit
static_assert(
    std::is_nothrow_constructible_v<qk::queue, const char *, qk_queue_kind_t, std::error_code &>);
static_assert(std::is_nothrow_constructible_v<qk::queue, const char *, qk_queue_kind_t,
                                              const qk::queue &, std::error_code &>);
static_assert(!std::is_copy_constructible_v<qk::db_queue> &&
              std::is_nothrow_move_constructible_v<qk::db_queue>);
static_assert(std::is_nothrow_move_assignable_v<qk::db_queue>);
static_assert(std::is_nothrow_constructible_v<qk::db_queue, const char *, std::error_code &>);
static_assert(!std::is_copy_constructible_v<qk::guarded<int>> &&
              !std::is_move_constructible_v<qk::guarded<int>>);

TEST(values_and_identity) {
    qk::queue empty;
    CHECK(!empty);
    CHECK(empty.native_handle() == nullptr);
    CHECK(std::string(empty.label()).empty());
    qk::queue q("com.example.cxx");
    CHECK(static_cast<bool>(q));
    CHECK(std::string(q.label()) == "com.example.cxx");
    qk::queue copy = q;
    CHECK(copy == q);
    CHECK(!(copy != q));
    qk::queue moved = std::move(copy);
    CHECK(!copy && moved == q);
    CHECK(!q.is_current() && !q.check() && q.check(QK_NOT_ON_QUEUE));
    q.sync([&] {
        CHECK(q.is_current());
        CHECK(q.check() && q.check(QK_ON_QUEUE_AS_BARRIER));
        CHECK(qk::queue::current() == q);
        q.precondition();
    });
    CHECK(qk::queue::global() && qk::queue::global(QK_QOS_UTILITY) != qk::queue::global());
    CHECK(!qk::queue::global(static_cast<qk_qos_t>(99)));
    CHECK(qk::queue::main().native_handle() == qk_queue_main());
    CHECK(!qk::queue::current() ||
          qk::queue::current() == qk::queue::main()); // main thread, outside blocks
    qk::queue target("target", QK_QUEUE_CONCURRENT);
    qk::queue inner("inner", QK_QUEUE_SERIAL, target);
    inner.sync([&] { CHECK(target.is_current() && inner.is_current()); });
    qk_queue_t *raw = qk_queue_create("raw", QK_QUEUE_SERIAL);
    {
        qk::queue adopted = qk::queue::adopt(raw);
        qk::queue retained = qk::queue::retain(raw);
        CHECK(adopted == retained);
    } // both references released: raw is gone
    std::error_code ec;
    qk::queue bad("bad", static_cast<qk_queue_kind_t>(7), ec);
    CHECK(!bad && ec.value() == EINVAL);
    qk::queue good("good", QK_QUEUE_SERIAL, ec);
    CHECK(good && !ec);
    qk::queue targeted("targeted", QK_QUEUE_SERIAL, good, ec);
    CHECK(targeted && !ec);
    qk::queue bad_target("bad target", QK_QUEUE_SERIAL, qk::queue::adopt(nullptr), ec);
    CHECK(bad_target && !ec); // an empty target is none
    qk::queue bad_kind("bad kind", static_cast<qk_queue_kind_t>(9), good, ec);
    CHECK(!bad_kind && ec.value() == EINVAL);
#if QK_CXX_EXCEPTIONS
    CHECK_THROWS_STATUS(qk::queue("bad", static_cast<qk_queue_kind_t>(7)), EINVAL,
                        "qk_queue_create");
#endif
}

TEST(results_void_move_only_reference) {
    qk::queue q("results", QK_QUEUE_CONCURRENT);
    q.sync([] {});
    CHECK(q.sync([] { return 42; }) == 42);
    std::unique_ptr<int> p = q.sync([] { return std::make_unique<int>(7); });
    CHECK(p && *p == 7);
    CHECK(*q.barrier_sync([] { return std::make_unique<int>(8); }) == 8);
    CHECK(*q.perform([] { return std::make_unique<int>(9); }) == 9);
    std::string text = "abc";
    auto &ref = text;
    auto by_reference = [&]() -> std::string & { return ref; };
    static_assert(std::is_same_v<decltype(q.sync(by_reference)), std::string>); // a copy
    std::string copy = q.sync(by_reference);
    CHECK(copy == "abc");
    struct no_default {
        explicit no_default(int v) : value(v) {}
        int value;
    };
    CHECK(q.sync([] { return no_default(3); }).value == 3);
    // rvalue callables are invoked as rvalues, lvalues as lvalues
    struct which {
        int operator()() & {
            return 1;
        }
        int operator()() && {
            return 2;
        }
    };
    which w;
    CHECK(q.sync(w) == 1 && q.sync(which{}) == 2);
    std::error_code ec;
    std::optional<std::unique_ptr<int>> o = q.sync([] { return std::make_unique<int>(5); }, ec);
    CHECK(!ec && o && **o == 5);
    q.perform([] {}, ec);
    CHECK(!ec);
    std::optional<int> b = q.barrier_sync([] { return 4; }, ec);
    CHECK(!ec && b == 4);
    check::signal barrier_ran;
    q.barrier_async([&] { barrier_ran.notify(); }, ec);
    CHECK(!ec && barrier_ran.wait());
    check::signal async_ran;
    q.async([&] { async_ran.notify(); }, ec);
    CHECK(!ec && async_ran.wait());
    qk::queue().barrier_sync([] {}, ec);
    CHECK(ec.value() == EINVAL);
    auto none = qk::queue().perform([] { return 1; }, ec);
    CHECK(!none && ec.value() == EINVAL);
    // perform inline on the queue itself
    q.barrier_sync([&] { CHECK(q.perform([&] { return q.check(QK_ON_QUEUE_AS_BARRIER); })); });
}

#if QK_CXX_EXCEPTIONS
TEST(exceptions_reach_the_caller_200_times) {
    qk::queue serial("throwing");
    qk::queue concurrent("throwing.c", QK_QUEUE_CONCURRENT);
    for (int i = 0; i < 200; ++i) {
        bool caught = false;
        try {
            serial.sync([i]() -> int { throw std::runtime_error("sync " + std::to_string(i)); });
        } catch (const std::runtime_error &e) {
            caught = std::string(e.what()) == "sync " + std::to_string(i);
        }
        CHECK(caught);
        caught = false;
        try {
            concurrent.barrier_sync([] { throw 17; });
        } catch (int v) {
            caught = v == 17;
        }
        CHECK(caught);
        caught = false;
        try {
            serial.perform([] { throw std::logic_error("p"); });
        } catch (const std::logic_error &) {
            caught = true;
        }
        CHECK(caught);
        CHECK(serial.sync([i] { return i; }) == i); // still healthy
    }
    // the error_code form: the C call succeeded, so ec is clear and the exception propagates
    std::error_code ec = std::make_error_code(std::errc::device_or_resource_busy);
    bool caught = false;
    try {
        serial.sync([] { throw 1; }, ec);
    } catch (int) {
        caught = true;
    }
    CHECK(caught && !ec);
}

TEST(sync_onto_self_is_edeadlk) {
    qk::queue q("self");
    q.sync([&] {
        CHECK_THROWS_STATUS(q.sync([] {}), EDEADLK, "qk_queue_sync");
        CHECK_THROWS_STATUS(q.barrier_sync([] {}), EDEADLK, "qk_queue_barrier_sync");
        try {
            q.sync([] {});
        } catch (const std::system_error &e) {
            CHECK(std::string(e.what()).find("qk_queue_sync: ") == 0);
        }
        std::error_code ec;
        auto r = q.sync([] { return 1; }, ec);
        CHECK(!r && ec.value() == EDEADLK && ec.category() == std::generic_category());
    });
    CHECK_THROWS_STATUS(qk::queue().sync([] {}), EINVAL, "qk_queue_sync");
}
#endif

TEST(async_callables_destroyed_where_they_ran) {
    qk::queue q("async");
    for (int round = 0; round < 2; ++round) {
        tracker::log log;
        if (round == 0)
            q.async(tracker(&log));
        else
            q.barrier_async(tracker(&log));
        CHECK(log.done.wait());
        CHECK(log.invoked == 1 && log.destroyed == 1);
        CHECK(log.ran_on == log.destroyed_on && log.ran_on != std::this_thread::get_id());
    }
    // move-only lambdas, and a copied lvalue: the original is untouched
    check::signal ran;
    q.async([p = std::make_unique<int>(3), &ran] {
        CHECK(*p == 3);
        ran.notify();
    });
    CHECK(ran.wait());
    std::atomic<int> count{0};
    check::signal done;
    auto add = [&count, &done] {
        if (++count == 2) done.notify();
    };
    q.async(add);
    q.async(add);
    CHECK(done.wait() && count == 2);
}

TEST(refused_async_destroyed_on_the_caller) {
    tracker::log log;
    std::error_code ec;
    qk::queue().async(tracker(&log), ec);
    CHECK(ec.value() == EINVAL);
    CHECK(log.invoked == 0 && log.destroyed == 1 && log.destroyed_on == std::this_thread::get_id());
#if QK_CXX_EXCEPTIONS
    tracker::log thrown;
    CHECK_THROWS_STATUS(qk::queue().barrier_async(tracker(&thrown)), EINVAL,
                        "qk_queue_barrier_async");
    CHECK(thrown.destroyed == 1 && thrown.destroyed_on == std::this_thread::get_id());
#endif
    // In a forked child every submission is ENOTRECOVERABLE.
    qk::queue q("forked");
    q.sync([] {});
    pid_t pid = fork();
    if (pid == 0) {
        tracker::log child;
        std::error_code e;
        q.async(tracker(&child), e);
        bool ok = e.value() == ENOTRECOVERABLE && child.invoked == 0 && child.destroyed == 1 &&
                  child.destroyed_on == std::this_thread::get_id();
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

CHILD(async_exception_terminates) {
    qk::queue q("terminating");
    check::signal never;
    std::set_terminate([] {
        std::fputs("terminate from the async callable\n", stderr);
        std::abort();
    });
#if QK_CXX_EXCEPTIONS
    q.async([] { throw 1; });
#else
    q.async([] { std::terminate(); });
#endif
    never.wait(std::chrono::seconds(20));
}

#if !QK_CXX_EXCEPTIONS
CHILD(throwing_form_without_exceptions) {
    qk::queue().sync([] {});
}

TEST(throwing_form_without_exceptions_aborts_with_its_line) {
    CHECK(check::dies_with("throwing_form_without_exceptions", "qk_queue_sync: Invalid argument"));
}
#endif

TEST(exception_escaping_async_terminates) {
    CHECK(check::dies_with("async_exception_terminates", "terminate from the async callable"));
}

CHECK_MAIN
