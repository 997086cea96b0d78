// ConnectionPool: a thread per allowed connection, and two threads that only say "no".
#include "connection_pool.hpp"

namespace vkformer::server {

namespace {
thread_local bool t_overflow = false;
}

bool over_connection_limit() { return t_overflow; }

ConnectionPool::ConnectionPool(size_t max_connections)
    : max_(max_connections), pool_(max_connections), overflow_(2) {}

void ConnectionPool::enqueue(std::function<void()> fn) {
  if (active_.fetch_add(1) < max_) {
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
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
