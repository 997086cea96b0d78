#pragma once
// One completion request as the scheduler thread and its HTTP thread share it: the scheduler
// appends text and finally a finish reason; the HTTP thread takes text as it comes (streaming)
// or waits for the end, and cancels when its client is gone.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "vkformer/sampling.hpp"

namespace vkformer::server {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 1;
  SamplingOptions sampling;
  std::vector<std::string> stop;
};

class GenerationJob {
 public:
  using Clock = std::chrono::steady_clock;
  explicit GenerationJob(GenerationRequest r) : request(std::move(r)) {}

  const GenerationRequest request;
  const Clock::time_point created = Clock::now();

  // Scheduler side.
  void emit(const std::string& text, int64_t tokens_so_far) {
    std::lock_guard lock(mutex_);
    pending_ += text;
    completion_tokens_ = tokens_so_far;
    changed_.notify_all();
  }
  void finish(const char* reason, int64_t tokens, std::string error = {}) {
    std::lock_guard lock(mutex_);
    finish_reason_ = reason;
    completion_tokens_ = tokens;
    error_ = std::move(error);
    done_ = true;
    changed_.notify_all();
  }
  bool cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

  // HTTP side. Waits up to `timeout` for text or the end; moves the text out. True once the job
  // is done and all its text taken.
  bool take(std::string& text, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
    text = std::exchange(pending_, std::string());
    return done_;
  }
  void cancel() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  // Valid once take() returned true.
  std::string finish_reason() const { std::lock_guard l(mutex_); return finish_reason_; }
  std::string error() const { std::lock_guard l(mutex_); return error_; }
  int64_t completion_tokens() const { std::lock_guard l(mutex_); return completion_tokens_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_, finish_reason_, error_;
  int64_t completion_tokens_ = 0;
  bool done_ = false, cancelled_ = false;
};

}  // namespace vkformer::server
