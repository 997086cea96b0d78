#include "interrupt.hpp"

#include <atomic>
#include <csignal>

namespace vkformer::cli {

namespace {

// Only a lock-free atomic may be written from a signal handler.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) { g_interrupted.store(true); }

}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted.store(false);
  previous_ = std::signal(SIGINT, on_sigint);
}

InterruptScope::~InterruptScope() { std::signal(SIGINT, previous_ == SIG_ERR ? SIG_DFL : previous_); }

bool InterruptScope::interrupted() { return g_interrupted.load(); }

}  // namespace vkformer::cli
