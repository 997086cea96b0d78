// The continuous-batching scheduler (scheduler.hpp).
#include "scheduler.hpp"

#include <algorithm>
#include <optional>

#include "api_error.hpp"
#include "stop_strings.hpp"
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer::server {

namespace {
// Prompt tokens one sequence runs per step: other sequences decode between its chunks, so a long
// prompt delays their next token by one chunk's pass, not by the whole prompt. 64 is the
// model's own prompt-pass width.
constexpr size_t kPromptChunk = 64;
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

struct Scheduler::Sequence {
  Sequence(std::shared_ptr<GenerationJob> j, int s)
      : job(std::move(j)), slot(s), sampler(job->request.sampling), stop(job->request.stop) {}
  std::shared_ptr<GenerationJob> job;
  int slot;
  size_t prompt_done = 0;  // prompt tokens in the cache
  Sampler sampler;
  StopStrings stop;
  Utf8StreamDecoder utf8;
  std::optional<int32_t> next;  // sampled, not yet in the cache
  int64_t generated = 0;
};

Scheduler::Scheduler(SequenceSlots& slots, size_t max_queue, Metrics& metrics)
    : slots_(slots), max_queue_(max_queue), metrics_(metrics) {
  active_.resize(static_cast<size_t>(slots.count()));
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

std::shared_ptr<GenerationJob> Scheduler::submit(GenerationRequest request) {
  auto job = std::make_shared<GenerationJob>(std::move(request));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw ApiError(503, "server_error", "the server is stopping");
    if (queue_.size() >= max_queue_)
      throw ApiError(503, "server_error",
                     "the request queue is full: " + std::to_string(queue_.size()) +
                         " requests wait for a slot (limit --max-queue " + std::to_string(max_queue_) + ")",
                     "", "queue_full");
    queue_.push_back(job);
    metrics_.queue_depth(static_cast<int64_t>(queue_.size()));
  }
  wake_.notify_one();
  return job;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  for (auto& job : queue_) job->finish("error", 0, "server stopping");
  queue_.clear();
  for (auto& s : active_)
    if (s) s->job->finish("error", s->generated, "server stopping");
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto busy = [&] { return std::any_of(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }); };
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy(); });
      if (stopping_) return;
    }
    admit();
    step();
    std::lock_guard lock(mutex_);
    metrics_.active_slots(std::count_if(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }));
  }
}

// Moves queued jobs into free slots (a cancelled one is dropped without taking a slot).
void Scheduler::admit() {
  std::lock_guard lock(mutex_);
  for (size_t s = 0; s < active_.size() && !queue_.empty(); ++s) {
    if (active_[s]) continue;
    std::shared_ptr<GenerationJob> job;
    while (!queue_.empty() && !job) {
      job = queue_.front();
      queue_.pop_front();
      if (job->cancelled()) {
        job->finish("cancelled", 0);
        job.reset();
      }
    }
    if (!job) break;
    slots_.reset(static_cast<int>(s));
    auto seq = std::make_unique<Sequence>(job, static_cast<int>(s));
    seq->sampler.accept(job->request.prompt);  // the repetition penalty sees the prompt, as generate() does
    active_[s] = std::move(seq);
  }
  metrics_.queue_depth(static_cast<int64_t>(queue_.size()));
  metrics_.active_slots(std::count_if(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }));
}

void Scheduler::step() {
  const GgufTokenizer& tokenizer = slots_.model().tokenizer();
  auto release = [&](size_t s) {
    std::lock_guard lock(mutex_);
    active_[s].reset();
  };
  // Samples from a sequence's logits and hands the text on; false when the sequence is done.
  auto advance = [&](Sequence& q, const std::vector<float>& logits) {
    if (q.generated == 0) metrics_.time_to_first_token(seconds_since(q.job->created));
    const int32_t token = q.sampler.sample(logits);
    q.sampler.accept(token);
    if (tokenizer.is_end_of_generation(token)) {
      q.job->emit(q.stop.push(q.utf8.flush()) + q.stop.flush(), q.generated);
      q.job->finish("stop", q.generated);
      return false;
    }
    ++q.generated;
    metrics_.completion_tokens(1);
    std::string text = tokenizer.is_control(token) ? std::string() : q.utf8.push(tokenizer.token_bytes(token));
    std::string shown = q.stop.push(text);
    if (q.stop.stopped()) {
      q.job->emit(shown, q.generated);
      q.job->finish("stop", q.generated);
      return false;
    }
    const bool full = slots_.position(q.slot) >= slots_.context();
    if (q.generated >= q.job->request.max_tokens || full) {
      q.utf8.discard();  // cut off inside a character: nothing of it is shown, as generate() does
      shown += q.stop.flush();
      q.job->emit(shown, q.generated);
      q.job->finish(q.stop.stopped() ? "stop" : "length", q.generated);
      return false;
    }
    q.job->emit(shown, q.generated);
    q.next = token;
    return true;
  };

  std::vector<SequenceSlots::Next> batch;
  std::vector<size_t> batch_seq;
  for (size_t s = 0; s < active_.size(); ++s) {
    Sequence* q = active_[s].get();
    if (!q) continue;
    if (q->job->cancelled()) {  // the client is gone: the slot is free for the next request now
      metrics_.disconnect();
      q->job->finish("cancelled", q->generated);
      release(s);
      continue;
    }
    try {
      const std::vector<int32_t>& prompt = q->job->request.prompt;
      if (q->prompt_done < prompt.size()) {  // one chunk of the prompt
        const size_t n = std::min(kPromptChunk, prompt.size() - q->prompt_done);
        std::vector<float> logits = slots_.prefill(q->slot, std::span(prompt).subspan(q->prompt_done, n));
        q->prompt_done += n;
        metrics_.prompt_tokens(static_cast<int64_t>(n));
        if (q->prompt_done == prompt.size() && !advance(*q, logits)) release(s);
      } else if (q->next) {
        batch.push_back({q->slot, *q->next});
        batch_seq.push_back(s);
      }
    } catch (const std::exception& e) {
      q->job->finish("error", q->generated, e.what());
      release(s);
    }
  }
  if (batch.empty()) return;
  const auto t0 = Clock::now();
  std::vector<std::vector<float>> logits;
  try {
    logits = slots_.decode(batch);
  } catch (const std::exception& e) {
    for (size_t s : batch_seq) {
      active_[s]->job->finish("error", active_[s]->generated, e.what());
      release(s);
    }
    return;
  }
  metrics_.generation_step(static_cast<int64_t>(batch.size()), seconds_since(t0));
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& q = *active_[batch_seq[i]];
    q.next.reset();
    bool more = false;
    try {
      more = advance(q, logits[i]);
    } catch (const std::exception& e) {
      q.job->finish("error", q.generated, e.what());
    }
    if (!more) release(batch_seq[i]);
  }
}

}  // namespace vkformer::server
