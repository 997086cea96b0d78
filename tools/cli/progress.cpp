#include "progress.hpp"

#include <cstdio>

#include "terminal.hpp"

namespace vkformer::cli {

Progress::Progress(std::string what, int64_t total, int64_t min_total)
    : what_(std::move(what)), total_(total), enabled_(total > min_total), tty_(platform::is_terminal(stderr)) {}

void Progress::advance(int64_t n) {
  if (!enabled_) return;
  done_ += n;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done_ / total_);
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %.1f s", what_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), seconds);
  } else if (const int tenth = static_cast<int>(10 * done_ / total_); tenth != last_tenth_) {
    last_tenth_ = tenth;
    std::fprintf(stderr, "%s: %lld/%lld (%.1f s)\n", what_.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), seconds);
  }
  std::fflush(stderr);
}

void Progress::clear() {
  if (enabled_ && tty_) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

void Progress::done() {
  if (enabled_ && tty_) std::fprintf(stderr, "\n");
}

}  // namespace vkformer::cli
