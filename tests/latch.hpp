#pragma once
// A std::latch made of a mutex and a condition variable, for the tests that make threads meet.
//
// Why not std::latch: on targets without a futex (MinGW-w64, whose Windows suites run under
// Wine), libstdc++ implements std::latch, std::barrier, std::counting_semaphore and
// std::atomic::wait on a shared pool of mutexes and condition variables, and GCC 12's version
// loses wake-ups: __waiter_pool::_M_do_wait reads the value, then locks the mutex and waits on
// the condition variable without reading it again, while _M_notify notifies without taking the
// mutex, so a count_down that lands between the waiter's read and its wait is never seen
// (libstdc++-v3/include/bits/atomic_wait.h, GCC 12; reworked in GCC 16 by "libstdc++: Move atomic
// wait/notify entry points into the library", whose message describes this race). Debian's
// MinGW-w64 GCC is 12.2: two threads meeting at arrive_and_wait() hung once in some thousand
// rounds there (issue 26). Here the count is read and waited on under one mutex, which a
// notification cannot slip past. Keep those four primitives out of code that runs on Windows.
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace vkformer::testing {

class Latch {
 public:
  explicit Latch(std::ptrdiff_t count) : count_(count) {}
  Latch(const Latch&) = delete;
  Latch& operator=(const Latch&) = delete;

  void count_down(std::ptrdiff_t n = 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    count_ -= n;
    // Under the lock: a waiter between its check and its wait holds the mutex, so it cannot miss
    // this (and the latch may be destroyed as soon as the last waiter returns).
    if (count_ <= 0) zero_.notify_all();
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    zero_.wait(lock, [this] { return count_ <= 0; });
  }

  bool try_wait() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_ <= 0;
  }

  void arrive_and_wait(std::ptrdiff_t n = 1) {
    std::unique_lock<std::mutex> lock(mutex_);
    count_ -= n;
    if (count_ <= 0) {
      zero_.notify_all();
      return;
    }
    zero_.wait(lock, [this] { return count_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  std::ptrdiff_t count_;
};

}  // namespace vkformer::testing
