#pragma once
// One completion request as the scheduler thread and its HTTP thread share it: the scheduler
// appends text and finally a finish reason; the HTTP thread takes text as it comes (streaming)
// or waits for the end, and cancels when its client is gone. Both sides note when the request
// reached each stage (Timeline), for /metrics and serve --verbose.
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
  bool cache_prompt = true;  // may start from a slot's cached prefix of the prompt
  // Tokens a context shift keeps at the start (llama-server's n_keep, the BOS token and the
  // -1 of "the whole prompt" resolved; at most the context - 4); used with --context-shift only.
  int64_t n_keep = 0;
  // Tokens a context shift forgets after n_keep (llama-server's n_discard; at most all but one of
  // them); 0: half of them.
  int64_t n_discard = 0;
  std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();  // the handler took it
};

// Where a request's time goes before its first token reaches the client. Unset stages are
// time_point{} (a request cancelled or refused before them).
struct Timeline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point received;      // the HTTP handler had the body (parsing and tokenizing follow)
  Clock::time_point queued;        // handed to the scheduler
  Clock::time_point admitted;      // given a slot
  Clock::time_point prompt_done;   // the step that ran its last prompt row ended
  Clock::time_point first_sample;  // its first token sampled
  Clock::time_point first_flush;   // its first text written to the client's socket
  int prompt_steps = 0;            // scheduler steps that carried rows of its prompt
  int64_t cached_tokens = 0;       // prompt tokens taken from a slot's cache, not computed

  static double seconds(Clock::time_point from, Clock::time_point to) {
    return from == Clock::time_point{} || to == Clock::time_point{} ? -1.0
                                                                       : std::chrono::duration<double>(to - from).count();
  }
};

class GenerationJob {
 public:
  using Clock = std::chrono::steady_clock;
  explicit GenerationJob(GenerationRequest r) : request(std::move(r)) {
    timeline_.received = request.received;
    timeline_.queued = created;
  }

  const GenerationRequest request;
  const Clock::time_point created = Clock::now();

  // Either side: a stage reached (the scheduler's stages, or the first flush).
  template <typename F>
  void note(F&& update) {
    std::lock_guard lock(mutex_);
    update(timeline_);
  }
  Timeline timeline() const { std::lock_guard l(mutex_); return timeline_; }

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
  Timeline timeline_;
  std::string pending_, finish_reason_, error_;
  int64_t completion_tokens_ = 0;
  bool done_ = false, cancelled_ = false;
};

}  // namespace vkformer::server
