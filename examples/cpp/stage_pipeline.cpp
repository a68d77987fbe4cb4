// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// A pipeline of three workers handing batches along with one qk::condition_lock<stage>: each
// takes the lock, then await()s its stage (releasing the lock while it waits, as
// condition_variable::wait(lock, pred) does) and hands over with unlock_with(next). A release
// wakes only the worker whose stage came up: no herd of threads re-testing a predicate (the
// lock's stats show it: futile wake-ups stay at zero but for the kernel's spurious ones).
#include <queuekit.hpp>

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

enum class stage { empty, fetched, parsed };

int main() {
    qk::condition_lock lock{stage::empty};
    qk_condlock_set_name(lock.native_handle(), "pipeline"); // shown in wait reports
    int batch = 0;                                          // guarded by lock
    std::vector<int> out;                                   // guarded by lock
    const int batches = 200;

    auto worker = [&](stage mine, stage next, auto step) {
        return std::thread([&, mine, next, step] {
            for (int i = 0; i < batches; ++i) {
                std::unique_lock<qk::condition_lock<stage>> held(lock);
                lock.await([mine](stage s) { return s == mine; });
                step();
                lock.unlock_with(next);
                held.release();
            }
        });
    };
    std::thread fetch =
        worker(stage::empty, stage::fetched, [&] { batch = static_cast<int>(out.size()) + 1; });
    std::thread parse = worker(stage::fetched, stage::parsed, [&] { batch *= 10; });
    std::thread store = worker(stage::parsed, stage::empty, [&] { out.push_back(batch); });
    fetch.join();
    parse.join();
    store.join();

    bool ordered = out.size() == static_cast<size_t>(batches);
    for (int i = 0; ordered && i < batches; ++i) ordered = out[i] == (i + 1) * 10;
    qk_condlock_stats_t stats{};
    stats.size = sizeof stats;
    qk_condlock_get_stats(lock.native_handle(), &stats);
    std::printf("%zu batches through 3 stages, %llu wake-ups, %llu futile\n", out.size(),
                static_cast<unsigned long long>(stats.wakeups),
                static_cast<unsigned long long>(stats.futile_wakeups));
    return ordered ? 0 : 1;
}
