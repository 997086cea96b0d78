#pragma once
// Continuous batching with a token budget per step (llama.cpp's -b, vLLM's chunked prefill,
// decode first): one thread runs steps; each carries every decoding sequence's next token, then
// as many prompt tokens of the sequences still reading their prompts as the budget
// (step_tokens) leaves, the shortest remaining prompts first, so that a burst of short requests
// gets its first tokens together and a long prompt fills what is left. A sequence whose prompt
// ends in a step samples its first token from that step's logits and hands it on at once.
//
// Prefix caching: a slot keeps the tokens whose keys and values it holds after its sequence
// leaves; a new request takes the free slot whose tokens share the longest prefix with its
// prompt (the least recently used among equals) and computes only the rest. The tokens a slot
// lists are only ever those of completed steps, so a sequence cancelled at any point leaves a
// valid prefix behind, and a failed step drops its slots' caches.
//
// Context shift (llama-server's --context-shift, off by default): a generating sequence whose
// slot is full (its tokens + 1 reach the context, llama-server's test) forgets half of its tokens
// after its first n_keep (BatchedLanguageModel::shift moves the rest down, the keys turned) and
// goes on, instead of ending with "length". The slot's token list is shifted the same way, so it
// matches the cache's rows; but the rows after n_keep were computed beside the forgotten tokens,
// so only the first n_keep are offered to the next request's prefix (never a half-valid prefix).
//
// Speculative decoding (--spec ngram or --model-draft, issue 38): a decoding sequence's row is
// followed by the tokens prompt lookup or the draft model (DraftSlots, proposing for all
// sequences at once before the step) proposes after it (Speculation), in the rows the step's
// prompts leave; the
// step returns every such row's logits, each row chooses a token as generate() does (greedy: the
// text of plain decoding), and the slot is truncated past the first proposal not kept. /metrics
// counts the proposals, those kept and the tokens each sequence gained per step.
//
// Requests join a free slot between steps and leave when done or cancelled (a client gone frees
// its slot at the next step); beyond the slots they wait in a bounded queue. A sequence's tokens
// depend only on its own slot, so batching never changes them.
//
// Gathering a burst (SchedulerOptions::gather): the requests of a burst reach the queue a few ms
// apart (each its own connection, parse and tokenization). A server with no sequence in a slot
// does not start a step for the first one at once: it waits until `gather` passes without a new
// request (at most 4 x `gather` after the first; or until the queue holds a request for every
// free slot), so that the burst's prompts share the first step instead of the first running
// alone while the others queue behind it. Only from idle: a
// request that arrives while sequences decode joins the next step without waiting, and their
// steps never wait.
//
// Device failures (issue 39): out of device memory in a step ends that step's requests
// ("out_of_memory") and drops their caches; the device and the model stay usable. A lost device
// (found by a step, or by another user of the device: the embedder) ends every request in a slot
// ("device_lost"), drops the slots, and has the model loaded anew through `reload` (which opens a
// new device): the queued requests wait for it and are served after. While a reload fails, the
// queue is refused with the reason and the thread tries again after 1 s, doubling up to 30 s.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "generation_job.hpp"
#include "metrics.hpp"
#include "request_metrics.hpp"
#include "sequence_slots.hpp"
#include "vkformer/generate.hpp"

namespace vkformer::server {

struct SchedulerOptions {
  size_t max_queue = 64;       // requests waiting for a slot; more are refused (503 queue_full)
  bool context_shift = false;  // --context-shift
  SpeculativeOptions speculative;  // --spec: mode off, ngram or draft (the slots' draft model)
  // From idle, how long the first step waits for another request of a burst after the latest
  // (at most 4 times this after the first; 0: it starts at once); --batch-window.
  std::chrono::microseconds gather{0};
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // The model's slots anew, on a device that works (ServerImpl opens one after a loss); throws
  // what loading throws.
  using Reload = std::function<std::unique_ptr<SequenceSlots>()>;
  Scheduler(std::unique_ptr<SequenceSlots> slots, Reload reload, const SchedulerOptions& options, Metrics& metrics,
            RequestMetrics& request_metrics);
  ~Scheduler();  // stop()

  // False from a device loss until the model is loaded again (GET /health: degraded); then
  // failure() says why.
  bool ready() const { return ready_; }
  std::string failure() const;
  // Another user of the device found it lost: the thread looks at once (and reloads).
  void device_check() { wake_.notify_all(); }

  // Queues a request (its tokens already checked against the context). ApiError 503 when the
  // queue is full or the server is shutting down.
  std::shared_ptr<GenerationJob> submit(GenerationRequest request);
  // Graceful end: refuses new requests, lets the queued and running ones go on until `deadline`,
  // then finishes what is left with the reason "shutdown". Returns when nothing is left.
  void drain(Clock::time_point deadline);
  // Finishes every job at once (reason "shutdown") and joins the thread.
  void stop();

 private:
  struct Sequence;
  struct SlotCache {
    std::vector<int32_t> tokens;  // whose keys and values the slot holds, in order
    uint64_t last_used = 0;       // the step that last wrote it (least recently used goes first)
    // After a context shift: the rows from here on were computed beside tokens since forgotten,
    // so a new request may reuse only tokens [0, exact) (SIZE_MAX: every row is exact).
    size_t exact = SIZE_MAX;
    size_t reusable() const { return std::min(tokens.size(), exact); }
  };
  void loop();
  void admit();
  void step();
  // Shifts the slots of decoding sequences that are full (--context-shift); false when `q` ended
  // (the shift failed) and its slot was released.
  bool shift_if_full(Sequence& q);
  void end_failed_shift(Sequence& q, const std::string& what);
  void end_all(const char* reason, const std::string& message);  // under mutex_, thread stopped or between steps
  int choose_slot(const std::vector<int32_t>& prompt, bool reuse, size_t* common) const;
  void lose_device(const std::string& what);  // ends the slots' requests, drops the slots
  void restore();                             // loads them anew; returns loaded, stopping or draining

  std::unique_ptr<SequenceSlots> slots_;  // null from a device loss until reloaded; this thread's alone
  Reload reload_;
  size_t max_queue_;
  Metrics& metrics_;
  RequestMetrics& request_metrics_;
  const bool context_shift_;
  const SpeculativeOptions speculative_;  // mode off, ngram or draft (slots_->draft())
  const std::chrono::microseconds gather_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  std::vector<std::unique_ptr<Sequence>> active_;  // one per slot; null = free
  std::vector<SlotCache> cache_;                   // one per slot, kept when its sequence leaves
  uint64_t steps_ = 0;
  bool stopping_ = false, draining_ = false;
  std::atomic<bool> ready_{true};
  bool refusing_ = false;  // a reload failed: submit() refuses with failure_ until one succeeds
  std::string failure_;
  Clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace vkformer::server
