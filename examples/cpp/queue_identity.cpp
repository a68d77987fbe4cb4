// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// "Which queue am I on?" in C++. The GCD pattern this replaces: a block on a serial queue calls
// a helper that does dispatch_sync onto the same queue -- a deadlock, crash or hang, which the
// usual dispatch_queue_set_specific / dispatch_get_specific check only dodges for one queue.
// Here sync onto the queue you are on is refused (EDEADLK, a std::system_error naming the call),
// perform() runs inline when you are already there, and check() answers the question directly.
#include <queuekit.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

/** A store whose public calls may be made from anywhere, including from its own queue. */
class store {
  public:
    /** Safe from any thread: runs on the store's queue, inline if already there. */
    void add(int v) {
        queue_.perform([&] { total_ += v; });
    }
    int total() {
        return queue_.perform([&] { return total_; });
    }
    /** Work that calls back into the store from the store's own queue. */
    void add_twice_async(int v, qk::queue done) {
        queue_.async([this, v, done]() mutable {
            add(v); // perform: inline, no deadlock
            add(v);
            done.async([] {});
        });
    }
    qk::queue &queue() {
        return queue_;
    }

  private:
    qk::queue queue_{"com.example.store"};
    int total_ = 0; // only touched on queue_
};

} // namespace

int main() {
    store s;
    s.add(1);
    qk::queue done("com.example.done");
    s.add_twice_async(2, done);
    done.sync([] {}); // the async work has finished once its completion ran
    s.queue().sync([] {});
    int total = s.total();

    // The original pattern's deadlock, made harmless: sync onto the serial queue the block runs on.
    std::string refusal;
    bool on_queue = false;
    s.queue().sync([&] {
        on_queue = s.queue().check() && qk::queue::current() == s.queue();
        try {
            s.queue().sync([] { std::puts("never runs"); });
        } catch (const std::system_error &e) {
            refusal = e.what();
        }
    });
    std::printf("total %d; on its queue: %s; sync onto itself: %s\n", total,
                on_queue ? "yes" : "no", refusal.c_str());
    return total == 5 && on_queue && refusal.rfind("qk_queue_sync: ", 0) == 0 ? 0 : 1;
}
