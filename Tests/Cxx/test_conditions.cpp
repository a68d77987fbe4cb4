// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// condition_lock's waits on a predicate (lock_if, await and their timed and try forms): built
// where <queuekit.h> declares the condition tests (QK_HAVE_CONDITION_TESTS).
#include <queuekit.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "check.hpp"

#if !defined(QK_HAVE_CONDITION_TESTS)
#error "this test needs the condition tests of <queuekit.h> (QK_HAVE_CONDITION_TESTS)"
#endif

namespace {
enum class stage { idle, parsed, checked, done };
using namespace std::chrono_literals;
} // namespace

TEST(lock_if_and_try_forms) {
    qk::condition_lock<int> l(3);
    l.lock_if([](int c) { return c > 2; });
    CHECK(qk_condlock_check_held(l.native_handle()) == 0);
    l.unlock_with(10);
    CHECK(l.try_lock_if([](int c) { return c % 5 == 0; }));
    l.unlock();
    CHECK(!l.try_lock_if([](int c) { return c < 0; }));
    auto start = std::chrono::steady_clock::now();
    CHECK(!l.try_lock_if_for([](int c) { return c < 0; }, 20ms));
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
    CHECK(
        !l.try_lock_if_until([](int c) { return c < 0; }, std::chrono::system_clock::now() + 10ms));
    CHECK(
        l.try_lock_if_until([](int c) { return c == 10; }, std::chrono::system_clock::now() - 1s));
    l.unlock();
    std::error_code ec;
    CHECK(l.lock_if([](int) { return true; }, ec) && !ec);
    CHECK(!l.lock_if([](int) { return true; }, ec) && ec.value() == EDEADLK);
    l.unlock();
    // another thread makes it true
    std::thread setter([&] { l.set(-1); });
    CHECK(l.try_lock_if_for([](int c) { return c < 0; }, 20s));
    l.unlock();
    setter.join();
}

TEST(await_in_a_pipeline) {
    qk::condition_lock l{stage::idle};
    std::vector<stage> seen;
    std::vector<std::thread> workers;
    const stage order[] = {stage::idle, stage::parsed, stage::checked};
    for (stage from : order) {
        workers.emplace_back([&, from] {
            std::lock_guard<qk::condition_lock<stage>> guard(l);
            l.await([from](stage s) { return s == from; }); // released while waiting
            seen.push_back(from);
            l.unlock_with(static_cast<stage>(static_cast<int>(from) + 1));
            l.lock(); // lock_guard releases it
        });
    }
    l.lock();
    CHECK(l.await_for([](stage s) { return s == stage::done; }, 20s));
    CHECK(seen == (std::vector<stage>{stage::idle, stage::parsed, stage::checked}));
    // timed out: holding the lock again
    CHECK(!l.await_for([](stage s) { return s == stage::idle; }, 10ms));
    CHECK(qk_condlock_check_held(l.native_handle()) == 0);
    CHECK(!l.await_until([](stage s) { return s == stage::idle; },
                         std::chrono::system_clock::now() + 5ms));
    CHECK(l.await_until([](stage s) { return s == stage::done; },
                        std::chrono::steady_clock::now() - 1s));
    std::error_code ec;
    l.await([](stage s) { return s == stage::done; }, ec);
    CHECK(!ec);
    l.unlock();
    for (auto &w : workers) w.join();
}

CHILD(await_not_held) {
    qk::condition_lock<int> l;
    l.await([](int) { return true; });
}
CHILD(await_for_not_held) {
    qk::condition_lock<int> l;
    (void)l.await_for([](int) { return true; }, 1s);
}
CHILD(predicate_throws) {
    std::set_terminate([] {
        std::fputs("terminate from the predicate\n", stderr);
        std::abort();
    });
    qk::condition_lock<int> l;
#if QK_CXX_EXCEPTIONS
    l.lock_if([](int) -> bool { throw 1; });
#else
    l.lock_if([](int) -> bool { std::terminate(); });
#endif
}

TEST(await_misuse_terminates) {
    CHECK(check::dies_with("await_not_held", "qk_condlock_await: EPERM"));
    CHECK(check::dies_with("await_for_not_held", "qk_condlock_await_until: EPERM"));
    CHECK(check::dies_with("predicate_throws", "terminate from the predicate"));
}

CHECK_MAIN
