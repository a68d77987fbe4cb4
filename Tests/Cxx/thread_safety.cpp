// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// Clang's -Wthread-safety over condition_lock: this file compiles cleanly as it is, and each
// REJECT=n variant is a misuse the analysis must reject (the ctest cxx.thread_safety.* tests).
#include <queuekit.hpp>

#include <mutex>

namespace {
enum class state { empty, full };

struct slot {
    qk::condition_lock<state> lock{state::empty};
    int value QK_GUARDED_BY(lock) = 0;

    void put(int v) {
        lock.lock_when(state::empty);
        value = v;
        lock.unlock_with(state::full);
    }
    bool try_take(int &out) {
        if (!lock.try_lock_when(state::full)) return false;
        out = value;
        lock.unlock_with(state::empty);
        return true;
    }
    bool take_for(int &out) {
        if (!lock.try_lock_when_for(state::full, std::chrono::milliseconds(1))) return false;
        out = value;
        lock.unlock_with(state::empty);
        return true;
    }
    void reset() {
        std::error_code ec;
        if (lock.lock(ec)) {
            value = 0;
            lock.unlock();
        }
    }
    void start() {
        lock.set(state::empty);
    }
#if defined(QK_HAVE_CONDITION_TESTS)
    void put_when_empty(int v) {
        lock.lock_if([](state s) { return s == state::empty; });
        value = v;
        lock.await([](state) { return true; });
        lock.unlock_with(state::full);
    }
#endif

#if REJECT == 1
    int read_unlocked() {
        return value;
    } // reading guarded data without the lock
#elif REJECT == 2
    void unlock_unheld() {
        lock.unlock();
    } // releasing a lock not held
#elif REJECT == 3
    void leak() {
        lock.lock();
        value = 1;
    } // still held at the end of the function
#elif REJECT == 4
    void unchecked_try() {
        lock.try_lock();
        value = 2;
    } // a try whose result is not checked
#elif REJECT == 5
    void set_while_held() {
        lock.lock();
        lock.set(state::full);
        lock.unlock();
    } // set excludes it
#endif
};
} // namespace

int main() {
    slot s;
    s.start();
    s.put(1);
    int out = 0;
    bool ok = s.try_take(out) && out == 1 && !s.take_for(out);
    s.reset();
    return ok ? 0 : 1;
}
