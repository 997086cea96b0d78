#pragma once
// Continuous batching: one thread runs steps; in each, every sequence still reading its prompt
// takes one chunk of it, and every generating sequence decodes one token, all through the same
// SequenceSlots::decode call. Requests join a free slot between steps and leave when done or
// cancelled (a client gone frees its slot at the next step); beyond the slots they wait in a
// bounded queue. A sequence's tokens depend only on its own slot, so batching never changes them.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "generation_job.hpp"
#include "metrics.hpp"
#include "sequence_slots.hpp"

namespace vkformer::server {

class Scheduler {
 public:
  Scheduler(SequenceSlots& slots, size_t max_queue, Metrics& metrics);
  ~Scheduler();  // stop()

  // Queues a request (its tokens already checked against the context). ApiError 503 when the
  // queue is full.
  std::shared_ptr<GenerationJob> submit(GenerationRequest request);
  // Finishes every job (reason "error", "server stopping") and joins the thread.
  void stop();

 private:
  struct Sequence;
  void loop();
  void admit();
  void step();

  SequenceSlots& slots_;
  size_t max_queue_;
  Metrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  std::vector<std::unique_ptr<Sequence>> active_;  // one per slot; null = free
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vkformer::server
