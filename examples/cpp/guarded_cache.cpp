// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// A cache that many threads read and a few fill: qk::guarded<std::map>. Readers share the map,
// a writer has it alone, and a lookup that misses fills the entry inside the same write, so
// nobody computes it twice. No mutex to forget, no reference that outlives the lock.
#include <queuekit.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

class cache {
  public:
    /** The square of `key`, computed once whoever asks first. */
    long get(int key) {
        if (auto hit = entries_.read([key](const std::map<int, long> &m) -> std::optional<long> {
                auto found = m.find(key);
                if (found == m.end()) return std::nullopt;
                return found->second;
            })) {
            hits_++;
            return *hit;
        }
        return entries_.write([&](std::map<int, long> &m) {
            auto [slot, inserted] = m.try_emplace(key, 0);
            if (inserted) { // nobody filled it between our read and this write
                slot->second = static_cast<long>(key) * key;
                computed_++;
            }
            return slot->second;
        });
    }
    size_t size() const {
        return entries_.read([](const std::map<int, long> &m) { return m.size(); });
    }
    int computed() const {
        return computed_;
    }
    int hits() const {
        return hits_;
    }

  private:
    qk::guarded<std::map<int, long>> entries_{{}, "com.example.cache"};
    std::atomic<int> computed_{0}, hits_{0};
};

} // namespace

int main() {
    cache squares;
    std::vector<std::thread> threads;
    std::atomic<bool> wrong{false};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int round = 0; round < 50; ++round)
                for (int key = 0; key < 100; ++key)
                    if (squares.get(key) != static_cast<long>(key) * key) wrong = true;
        });
    }
    for (auto &thread : threads) thread.join();
    std::printf("%zu entries, computed %d times, %d hits\n", squares.size(), squares.computed(),
                squares.hits());
    return !wrong && squares.size() == 100 && squares.computed() == 100 ? 0 : 1;
}
