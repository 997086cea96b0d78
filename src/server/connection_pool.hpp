#pragma once
// cpp-httplib's task queue with a limit on connections served at once. A connection beyond the
// limit is still read, on a small overflow pool, but only to answer 503 naming the limit
// (over_connection_limit() tells the handlers), so a flood of clients cannot take every thread.
// The connections admitted are counted in Metrics (the vkformer_open_connections gauge).
#include <httplib.h>

#include <atomic>
#include <functional>

#include "metrics.hpp"

namespace vkformer::server {

bool over_connection_limit();  // true on an overflow thread, for the request it serves

class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(size_t max_connections, Metrics& metrics);
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  size_t max_;
  Metrics& metrics_;
  std::atomic<size_t> active_{0};
  httplib::ThreadPool pool_, overflow_;
};

}  // namespace vkformer::server
