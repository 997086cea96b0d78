#pragma once
// The server's counters, rendered as Prometheus text for GET /metrics. Updated from the HTTP
// threads and the scheduler thread; everything is atomic or under one mutex.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace vkformer::server {

class Metrics {
 public:
  void request(const std::string& endpoint, int status);  // one answered request
  void prompt_tokens(int64_t n) { prompt_tokens_ += n; }
  void completion_tokens(int64_t n) { completion_tokens_ += n; }
  void time_to_first_token(double seconds);
  void generation_step(int64_t tokens, double seconds);  // a scheduler step's decoded tokens
  // A decoding sequence's turn in a step: `drafted` proposals verified (speculative decoding,
  // --spec), `accepted` of them kept, `tokens` gained (accepted + 1, or fewer where it ended).
  void decode_pass(int64_t drafted, int64_t accepted, int64_t tokens) {
    drafted_ += drafted;
    accepted_ += accepted;
    decode_passes_ += 1;
    decode_pass_tokens_ += tokens;
  }
  void queue_depth(int64_t n) { queue_depth_ = n; }
  void active_slots(int64_t n) { active_slots_ = n; }
  void disconnect() { ++disconnects_; }
  // Device failures: a loss found (the model then reloaded on a new device), a reload done.
  void device_lost() { ++device_losses_; }
  void model_reloaded() { ++model_reloads_; }
  // A slot's context shift (--context-shift): `discarded` tokens forgotten.
  void context_shift(int64_t discarded) {
    ++context_shifts_;
    context_shift_tokens_ += discarded;
  }
  // A connection admitted under --max-connections begins or ends (ConnectionPool); the 503s
  // over the limit are not counted.
  void connection_opened() { ++open_connections_; }
  void connection_closed() { --open_connections_; }
  std::string render(int parallel) const;

 private:
  static constexpr std::array<double, 10> kTtftBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (endpoint, status) -> count
  std::array<int64_t, kTtftBuckets.size() + 1> ttft_counts_{};
  double ttft_sum_ = 0;
  int64_t ttft_count_ = 0;
  double step_tokens_ = 0, step_seconds_ = 0;  // totals, for the average decode rate
  std::atomic<int64_t> prompt_tokens_{0}, completion_tokens_{0}, queue_depth_{0}, active_slots_{0},
      disconnects_{0}, open_connections_{0}, device_losses_{0}, model_reloads_{0}, context_shifts_{0},
      context_shift_tokens_{0}, drafted_{0}, accepted_{0}, decode_passes_{0}, decode_pass_tokens_{0};
};

}  // namespace vkformer::server
