// ConnectionPool: a thread per allowed connection, and two threads that only say "no".
#include "connection_pool.hpp"

namespace vkformer::server {

namespace {
thread_local bool t_overflow = false;
}

bool over_connection_limit() { return t_overflow; }

ConnectionPool::ConnectionPool(size_t max_connections, Metrics& metrics)
    : max_(max_connections), metrics_(metrics), pool_(max_connections), overflow_(2) {}

void ConnectionPool::enqueue(std::function<void()> fn) {
  if (active_.fetch_add(1) < max_) {
    // The gauge counts inside active_ (up after it, down before it): when it reads the limit, the
    // next connection is sure to get 503, which is what tests wait for instead of sleeping.
    metrics_.connection_opened();
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      metrics_.connection_closed();
      active_.fetch_sub(1);
    });
    return;
  }
  active_.fetch_sub(1);
  overflow_.enqueue([fn = std::move(fn)] {
    t_overflow = true;
    fn();
    t_overflow = false;
  });
}

void ConnectionPool::shutdown() {
  pool_.shutdown();
  overflow_.shutdown();
}

}  // namespace vkformer::server
