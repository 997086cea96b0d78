// The continuous-batching scheduler (scheduler.hpp).
#include "scheduler.hpp"

#include <algorithm>
#include <optional>

#include "api_error.hpp"
#include "speculation.hpp"
#include "stop_strings.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer::server {

namespace {
// A burst's gathering ends `gather` after its latest request, at most this many after its first.
constexpr int kGatherSpans = 4;

double seconds_since(Scheduler::Clock::time_point t) {
  return std::chrono::duration<double>(Scheduler::Clock::now() - t).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
                             a.begin());
}
}  // namespace

struct Scheduler::Sequence {
  Sequence(std::shared_ptr<GenerationJob> j, int s)
      : job(std::move(j)), slot(s), sampler(job->request.sampling), stop(job->request.stop) {}
  std::shared_ptr<GenerationJob> job;
  int slot;
  size_t prompt_done = 0;  // prompt tokens in the cache (from the slot's cache first, then computed)
  Sampler sampler;
  StopStrings stop;
  Utf8StreamDecoder utf8;
  std::optional<int32_t> next;  // sampled, not yet in the cache
  int64_t generated = 0;
  std::optional<Speculation> spec;  // with --spec: the proposer and the acceptance draws
  std::vector<int32_t> verify;      // a step's piece with proposals: `next`, then the proposals
  size_t remaining() const { return job->request.prompt.size() - prompt_done; }
};

Scheduler::Scheduler(std::unique_ptr<SequenceSlots> slots, Reload reload, const SchedulerOptions& options,
                     Metrics& metrics, RequestMetrics& request_metrics)
    : slots_(std::move(slots)), reload_(std::move(reload)), max_queue_(options.max_queue), metrics_(metrics),
      request_metrics_(request_metrics), context_shift_(options.context_shift), speculative_(options.speculative),
      gather_(options.gather) {
  active_.resize(static_cast<size_t>(slots_->count()));
  cache_.resize(static_cast<size_t>(slots_->count()));
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

std::string Scheduler::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::shared_ptr<GenerationJob> Scheduler::submit(GenerationRequest request) {
  auto job = std::make_shared<GenerationJob>(std::move(request));
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || draining_)
      throw ApiError(503, "server_error", "the server is shutting down", "", "server_shutting_down");
    if (refusing_)
      throw ApiError(503, "server_error",
                     failure_ + "; the server tries again: retry when GET /health answers 200", "", "device_lost");
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

void Scheduler::drain(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  deadline_ = deadline;
  wake_.notify_all();
  // The loop ends what is left at the deadline (after the step in progress); this only waits.
  idle_.wait(lock, [&] {
    return stopping_ ||
           (queue_.empty() && std::none_of(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }));
  });
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  idle_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  end_all("shutdown", "the server is shutting down");
}

void Scheduler::end_all(const char* reason, const std::string& message) {
  for (auto& job : queue_) job->finish(reason, 0, message);
  queue_.clear();
  for (auto& s : active_)
    if (s) {
      s->job->finish(reason, s->generated, message);
      s.reset();
    }
  metrics_.queue_depth(0);
  metrics_.active_slots(0);
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto idle = [&] {
        return queue_.empty() && std::none_of(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; });
      };
      if (draining_ && idle()) idle_.notify_all();
      // Lost (a step found it, or another user of the device did): reload, unless shutting down.
      auto lost = [&] { return slots_ ? slots_->device_lost() : !draining_; };
      auto pending = [&] { return stopping_ || !idle() || lost(); };
      if (draining_ && Clock::now() < deadline_) wake_.wait_until(lock, deadline_, pending);
      else wake_.wait(lock, pending);
      if (stopping_) return;
      if (draining_ && !idle() && (!slots_ || Clock::now() >= deadline_)) {
        end_all("shutdown", slots_ ? "the server is shutting down: the request did not finish within the grace period"
                                   : "the server is shutting down");
        continue;
      }
      if (!lost() && idle()) continue;  // the deadline came with nothing left
      // From idle, the rest of a burst: until `gather_` passes without a new request (at most
      // kGatherSpans windows after the first), or a request for every free slot (every slot is
      // free here).
      const bool empty_slots = std::none_of(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; });
      if (gather_.count() > 0 && empty_slots && !queue_.empty() && slots_ && !lost()) {
        const Clock::time_point last_call = queue_.front()->created + kGatherSpans * gather_;
        for (;;) {
          if (stopping_) return;
          if (queue_.size() >= active_.size()) break;
          const Clock::time_point until = std::min(queue_.back()->created + gather_, last_call);
          if (Clock::now() >= until) break;
          wake_.wait_until(lock, until);
        }
      }
    }
    if (!slots_ || slots_->device_lost()) {
      if (slots_) lose_device("the device was lost (another of its users found it)");
      restore();
      continue;
    }
    try {
      admit();
      step();
    } catch (const std::exception& e) {
      // Not expected (step() catches the model's errors): the requests in slots end with the
      // error, and the caches, whose state is then unknown, are dropped, rather than the thread.
      std::lock_guard lock(mutex_);
      for (size_t s = 0; s < active_.size(); ++s) {
        if (active_[s]) active_[s]->job->finish("error", active_[s]->generated, e.what());
        active_[s].reset();
        cache_[s].tokens.clear();
        try {
          if (slots_) slots_->truncate(static_cast<int>(s), 0);
        } catch (const std::exception&) {
        }
      }
    }
    std::lock_guard lock(mutex_);
    metrics_.active_slots(std::count_if(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }));
  }
}

void Scheduler::lose_device(const std::string& what) {
  const std::string message = what + "; the server is loading the model again: retry when GET /health answers 200";
  {
    std::lock_guard lock(mutex_);
    for (size_t s = 0; s < active_.size(); ++s) {
      if (active_[s]) active_[s]->job->finish("device_lost", active_[s]->generated, message);
      active_[s].reset();
      cache_[s].tokens.clear();
    }
    ready_ = false;
    failure_ = what;
    metrics_.active_slots(0);
  }
  metrics_.device_lost();
  slots_.reset();  // what it held on the lost device, freed before a new device is opened
}

void Scheduler::restore() {
  for (auto wait = std::chrono::seconds(1);; wait = std::min(wait * 2, std::chrono::seconds(30))) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || draining_) return;
    }
    try {
      std::unique_ptr<SequenceSlots> slots = reload_();
      std::lock_guard lock(mutex_);
      slots_ = std::move(slots);
      refusing_ = false;
      failure_.clear();
      ready_ = true;
      metrics_.model_reloaded();
      return;
    } catch (const std::exception& e) {
      std::unique_lock lock(mutex_);
      failure_ = std::string("loading the model again after the device failed did not work: ") + e.what();
      refusing_ = true;
      for (auto& job : queue_)
        job->finish("device_lost", 0, failure_ + "; the server tries again: retry when GET /health answers 200");
      queue_.clear();
      metrics_.queue_depth(0);
      wake_.wait_for(lock, wait, [&] { return stopping_ || draining_; });
    }
  }
}

// The free slot for a prompt: the one whose cached tokens share the longest prefix with it (with
// `reuse`), else, and among equals, the least recently written. -1 when none is free.
int Scheduler::choose_slot(const std::vector<int32_t>& prompt, bool reuse, size_t* common) const {
  int best = -1;
  size_t best_common = 0;
  for (size_t s = 0; s < active_.size(); ++s) {
    if (active_[s]) continue;
    const size_t c = reuse ? std::min(common_prefix(cache_[s].tokens, prompt), cache_[s].reusable()) : 0;
    if (best < 0 || c > best_common ||
        (c == best_common && cache_[s].last_used < cache_[static_cast<size_t>(best)].last_used)) {
      best = static_cast<int>(s);
      best_common = c;
    }
  }
  *common = best_common;
  return best;
}

// Moves queued jobs into free slots (a cancelled one is dropped without taking a slot), each
// starting after the prefix of its prompt that its slot already holds.
void Scheduler::admit() {
  std::lock_guard lock(mutex_);
  while (!queue_.empty()) {
    std::shared_ptr<GenerationJob> job = queue_.front();
    if (job->cancelled()) {
      queue_.pop_front();
      job->finish("cancelled", 0);
      request_metrics_.cancelled(RequestMetrics::Stage::queue);
      continue;
    }
    size_t common = 0;
    const int slot = choose_slot(job->request.prompt, job->request.cache_prompt, &common);
    if (slot < 0) break;
    queue_.pop_front();
    // At least the prompt's last token is computed: its logits give the first token.
    const size_t reused = std::min(common, job->request.prompt.size() - 1);
    SlotCache& cache = cache_[static_cast<size_t>(slot)];
    try {
      slots_->truncate(slot, static_cast<int64_t>(reused));
    } catch (const std::exception& e) {  // the slot's list and cache disagree (not expected): drop both
      job->finish("error", 0, e.what());
      cache.tokens.clear();
      slots_->truncate(slot, 0);
      continue;
    }
    cache.tokens.resize(reused);
    cache.exact = SIZE_MAX;  // reused <= reusable(): the rows kept are exact, and so are those computed after them
    auto seq = std::make_unique<Sequence>(job, slot);
    seq->prompt_done = reused;
    seq->sampler.accept(job->request.prompt);  // the repetition penalty sees the prompt, as generate() does
    if (speculative_.mode != SpeculativeMode::off)
      seq->spec.emplace(speculative_, job->request.prompt, job->request.sampling.seed);
    job->note([&](Timeline& t) {
      t.admitted = Clock::now();
      t.cached_tokens = static_cast<int64_t>(reused);
    });
    metrics_.prompt_tokens(static_cast<int64_t>(reused));
    request_metrics_.cached_tokens(static_cast<int64_t>(reused));
    active_[static_cast<size_t>(slot)] = std::move(seq);
  }
  metrics_.queue_depth(static_cast<int64_t>(queue_.size()));
  metrics_.active_slots(std::count_if(active_.begin(), active_.end(), [](auto& s) { return s != nullptr; }));
}

void Scheduler::step() {
  const GgufTokenizer& tokenizer = slots_->model().tokenizer();
  auto release = [&](size_t s) {
    std::lock_guard lock(mutex_);
    active_[s].reset();
  };
  // Hands on a sequence's chosen token (sampled from its row's logits, or a proposal kept), with
  // `cached` tokens in its slot before it; false when the sequence is done.
  auto advance = [&](Sequence& q, int32_t token, int64_t cached) {
    q.sampler.accept(token);
    if (q.spec) q.spec->push(token);
    if (q.generated == 0) {
      metrics_.time_to_first_token(seconds_since(q.job->created));
      q.job->note([](Timeline& t) { t.first_sample = Clock::now(); });
    }
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
    // With --context-shift a full slot is shifted before the next step instead.
    const bool full = !context_shift_ && cached >= slots_->context();
    if (q.generated >= q.job->request.max_tokens || full) {
      q.utf8.discard();  // cut off inside a character: nothing of it is shown, as generate() does
      shown += q.stop.flush();
      q.job->emit(shown, q.generated);
      q.job->finish(q.stop.stopped() ? "stop" : "length", q.generated);
      return false;
    }
    q.job->emit(shown, q.generated);
    return true;
  };

  // Decoding sequences first, a row each; then prompt tokens, shortest remaining prompt first.
  std::vector<Sequence*> decoding, reading;
  for (size_t s = 0; s < active_.size(); ++s) {
    Sequence* q = active_[s].get();
    if (!q) continue;
    if (q->job->cancelled()) {  // the client is gone: the slot is free for the next request now
      metrics_.disconnect();
      request_metrics_.cancelled(q->next || q->remaining() == 0 ? RequestMetrics::Stage::generation
                                                                : RequestMetrics::Stage::prompt);
      q->job->finish("cancelled", q->generated);
      release(s);
      continue;
    }
    if (q->next) {
      if (context_shift_ && !shift_if_full(*q)) {
        if (!slots_) return;  // the device was lost: every slot is gone
        continue;
      }
      decoding.push_back(q);
    } else if (q->remaining() > 0) {
      reading.push_back(q);
    }
  }
  std::stable_sort(reading.begin(), reading.end(), [](const Sequence* a, const Sequence* b) {
    if (a->remaining() != b->remaining()) return a->remaining() < b->remaining();
    return a->job->created < b->job->created;
  });
  std::vector<SequenceSlots::Piece> pieces, prompt_pieces;
  std::vector<Sequence*> in_step, prompt_seqs;  // pieces' sequences, in order
  const int64_t decode_rows = static_cast<int64_t>(decoding.size());
  int64_t budget = slots_->step_tokens() - decode_rows, prompt_rows = 0, draft_rows = 0;
  int64_t logit_rows_left = slots_->logit_rows() - decode_rows;
  for (Sequence* q : reading) {
    const size_t n = std::min<size_t>(q->remaining(), static_cast<size_t>(std::max<int64_t>(budget, 0)));
    if (n == 0) break;
    const std::vector<int32_t>& prompt = q->job->request.prompt;
    prompt_pieces.push_back({q->slot, std::span(prompt).subspan(q->prompt_done, n), n == q->remaining()});
    prompt_seqs.push_back(q);
    budget -= static_cast<int64_t>(n);
    logit_rows_left -= n == q->remaining() ? 1 : 0;
    prompt_rows += static_cast<int64_t>(n);
  }
  // Each decoding sequence's row, with the proposals after it in the rows the prompts left (they
  // must fit in its slot, and in its max_tokens with the token the last row chooses). A draft
  // model proposes for every sequence at once, as many as each could take; the rows left decide.
  // With --context-shift one row less: the slot then ends the step at most one short of full, so
  // its shifts come at the tokens plain decoding's come at (llama-server's test, tokens + 1 =
  // context), with the same amounts, and greedy text stays plain decoding's past the context.
  auto room = [&](const Sequence& q) {
    return std::min(slots_->context() - slots_->position(q.slot) - (context_shift_ ? 2 : 1),
                    q.job->request.max_tokens - q.generated - 1);
  };
  std::vector<std::vector<int32_t>> drafted(decoding.size());
  if (DraftSlots* draft = slots_->draft(); draft && speculative_.mode == SpeculativeMode::draft && budget > 0) {
    std::vector<DraftSlots::Want> wants;
    for (const Sequence* q : decoding)
      wants.push_back({q->slot, q->spec->text(), std::min<int64_t>({room(*q), speculative_.draft_max, budget})});
    drafted = draft->propose(wants, speculative_.draft_p_min);
  }
  for (size_t j = 0; j < decoding.size(); ++j) {
    Sequence* q = decoding[j];
    q->verify.assign(1, *q->next);
    if (q->spec) {
      const int64_t most = std::min({room(*q), budget, logit_rows_left});
      const std::vector<int32_t> drafts = speculative_.mode == SpeculativeMode::draft
                                              ? q->spec->limit(std::move(drafted[j]), most)
                                              : q->spec->propose(most);
      q->verify.insert(q->verify.end(), drafts.begin(), drafts.end());
      budget -= static_cast<int64_t>(drafts.size());
      logit_rows_left -= static_cast<int64_t>(drafts.size());
      draft_rows += static_cast<int64_t>(drafts.size());
    }
    pieces.push_back({q->slot, q->verify, true, q->verify.size() > 1});
    in_step.push_back(q);
  }
  pieces.insert(pieces.end(), prompt_pieces.begin(), prompt_pieces.end());
  in_step.insert(in_step.end(), prompt_seqs.begin(), prompt_seqs.end());
  if (pieces.empty()) return;

  const auto t0 = Clock::now();
  std::vector<std::vector<float>> logits;
  try {
    logits = slots_->step(pieces);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::device_lost) {
      lose_device(e.what());
      return;
    }
    // What the failed pass wrote is unknown: those slots' caches are dropped, not half-kept.
    // Out of device memory leaves the device and the model usable: the requests may retry.
    const char* reason = e.code() == ErrorCode::out_of_memory ? "out_of_memory" : "error";
    for (Sequence* q : in_step) {
      const size_t s = static_cast<size_t>(q->slot);
      q->job->finish(reason, q->generated, e.what());
      cache_[s].tokens.clear();
      slots_->truncate(q->slot, 0);
      release(s);
    }
    return;
  } catch (const std::exception& e) {
    for (Sequence* q : in_step) {
      const size_t s = static_cast<size_t>(q->slot);
      q->job->finish("error", q->generated, e.what());
      cache_[s].tokens.clear();
      slots_->truncate(q->slot, 0);
      release(s);
    }
    return;
  }
  const auto t1 = Clock::now();
  ++steps_;
  request_metrics_.step(decode_rows + draft_rows, prompt_rows, std::chrono::duration<double>(t1 - t0).count());
  metrics_.prompt_tokens(prompt_rows);

  size_t next_logits = 0;
  int64_t decoded = 0;  // tokens the decoding sequences gained
  for (size_t i = 0; i < pieces.size(); ++i) {
    Sequence& q = *in_step[i];
    const size_t s = static_cast<size_t>(q.slot);
    SlotCache& cache = cache_[s];
    cache.tokens.insert(cache.tokens.end(), pieces[i].tokens.begin(), pieces[i].tokens.end());
    cache.last_used = steps_;
    const bool was_prompt = !q.next;
    if (was_prompt) {
      q.prompt_done += pieces[i].tokens.size();
      q.job->note([&](Timeline& t) {
        ++t.prompt_steps;
        if (q.remaining() == 0) t.prompt_done = t1;
      });
    }
    if (!pieces[i].logits) continue;
    q.next.reset();
    // Row r chooses the token after the piece's token r: a proposal kept goes on to the next row;
    // the first one not kept (or the last row) ends the sequence's turn, the proposals after it
    // truncated from the slot.
    const int64_t drafts = pieces[i].every_logit ? static_cast<int64_t>(pieces[i].tokens.size()) - 1 : 0;
    const int64_t end = slots_->position(q.slot);
    int64_t kept = 0, chosen = 0;
    bool more = false;
    try {
      for (int64_t r = 0; r <= drafts; ++r) {
        const std::vector<float>& row = logits.at(next_logits + static_cast<size_t>(r));
        const int32_t draft = r < drafts ? pieces[i].tokens[static_cast<size_t>(r + 1)] : -1;
        const Speculation::Choice c =
            q.spec ? q.spec->choose(q.sampler, row, draft) : Speculation::Choice{q.sampler.sample(row), false};
        const int64_t cached = end - (drafts - r);  // the piece's tokens up to row r's
        if (r < drafts && !c.accepted) {
          slots_->truncate(q.slot, cached);
          cache.tokens.resize(static_cast<size_t>(cached));
        }
        ++chosen;
        kept += c.accepted ? 1 : 0;
        more = advance(q, c.token, cached);
        if (!more) break;
        if (!c.accepted) {
          q.next = c.token;
          break;
        }
      }
    } catch (const std::exception& e) {
      q.job->finish("error", q.generated, e.what());
      more = false;
    }
    next_logits += static_cast<size_t>(drafts + 1);
    if (was_prompt) {
      if (!more) release(s);
      continue;
    }
    decoded += chosen;
    metrics_.decode_pass(drafts, kept, chosen);
    if (!more) release(s);
  }
  if (decode_rows > 0) metrics_.generation_step(decoded, std::chrono::duration<double>(t1 - t0).count());
}

// What a failed shift moved is unknown: the slot's cache is dropped, not half-kept.
void Scheduler::end_failed_shift(Sequence& q, const std::string& what) {
  const size_t s = static_cast<size_t>(q.slot);
  q.job->finish("error", q.generated, "context shift failed: " + what);
  cache_[s].tokens.clear();
  try {
    slots_->truncate(q.slot, 0);
  } catch (const std::exception&) {
  }
  std::lock_guard lock(mutex_);
  active_[s].reset();
}

bool Scheduler::shift_if_full(Sequence& q) {
  const size_t s = static_cast<size_t>(q.slot);
  const int64_t n = slots_->position(q.slot), context = slots_->context();
  if (n + 1 < context) return true;  // llama-server's test: room for the next token and one more
  // llama-server's amounts: n_keep (at most context - 4, as the request's was checked), and
  // n_discard of the rest discarded, half of it when 0 (at least one token kept after n_keep).
  const int64_t keep = std::clamp<int64_t>(q.job->request.n_keep, 0, std::max<int64_t>(0, context - 4));
  const int64_t left = n - keep, asked = q.job->request.n_discard;
  const int64_t discard = std::clamp<int64_t>(asked > 0 ? asked : left / 2, 0, std::max<int64_t>(0, left - 1));
  SlotCache& cache = cache_[s];
  try {
    const std::string where = "slot " + std::to_string(q.slot) + " (" + std::to_string(n) + " of " +
                              std::to_string(context) + " tokens)";
    if (cache.tokens.size() != static_cast<size_t>(n))  // not expected: the list follows every step
      throw Error(ErrorCode::invalid_argument, where + " lists " + std::to_string(cache.tokens.size()) + " tokens");
    if (discard < 1)
      throw Error(ErrorCode::invalid_argument, where + ": n_keep " + std::to_string(keep) + " leaves nothing to discard");
    slots_->shift(q.slot, keep, discard);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::device_lost) {
      lose_device(e.what());
      return false;
    }
    end_failed_shift(q, e.what());
    return false;
  } catch (const std::exception& e) {
    end_failed_shift(q, e.what());
    return false;
  }
  cache.tokens.erase(cache.tokens.begin() + static_cast<std::ptrdiff_t>(keep),
                     cache.tokens.begin() + static_cast<std::ptrdiff_t>(keep + discard));
  cache.exact = std::min(cache.exact, static_cast<size_t>(keep));
  metrics_.context_shift(discard);
  return true;
}

}  // namespace vkformer::server
