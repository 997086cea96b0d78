#pragma once
// Where requests' time goes, for GET /metrics (rendered after Metrics' counters): a histogram per
// stage of a request's way to its first token (Timeline: parse, queue, prompt, sample, flush, and
// their total), the prompt tokens taken from slots' caches, and what the scheduler's steps
// carried. Kept apart from Metrics so that each stays one screen.
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "generation_job.hpp"

namespace vkformer::server {

class RequestMetrics {
 public:
  // An answered request's stages (those that produced no token are left out).
  void timeline(const Timeline& t);
  void cached_tokens(int64_t n) { cached_tokens_ += n; }
  // A request whose client left: while it waited for a slot, read its prompt, or generated.
  enum class Stage { queue, prompt, generation };
  void cancelled(Stage s) { ++cancelled_[static_cast<size_t>(s)]; }
  // A scheduler step: decoding rows, prompt rows, and how long it ran.
  void step(int64_t decode_rows, int64_t prompt_rows, double seconds);
  std::string render() const;

  static constexpr const char* kStages[] = {"parse", "queue", "prompt", "sample", "flush", "total"};

 private:
  static constexpr std::array<double, 12> kBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  static constexpr size_t kStageCount = std::size(kStages);
  struct Histogram {
    std::array<int64_t, kBuckets.size() + 1> counts{};
    double sum = 0;
    int64_t count = 0;
  };
  mutable std::mutex mutex_;
  std::array<Histogram, kStageCount> stages_;
  std::atomic<int64_t> cached_tokens_{0}, steps_{0}, decode_rows_{0}, prompt_rows_{0};
  std::array<std::atomic<int64_t>, 3> cancelled_{};
  double step_seconds_ = 0;  // under mutex_
};

}  // namespace vkformer::server
