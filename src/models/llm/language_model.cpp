// LanguageModel: a decoder-only GGUF (any family of llm/family.hpp) on the device with its KV caches and two recorded graphs, one for
// chunks of prompt tokens and one for single decoded tokens (and, compiled on first use, chunks that only fill the caches and
// chunks that return every token's logits).
#include <algorithm>
#include <bit>
#include <map>
#include <string>

#include "exclusive_use.hpp"
#include "llm/config.hpp"
#include "llm/forward.hpp"
#include "llm/loaded_model.hpp"
#include "llm/weights.hpp"
#include "token_ids.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

namespace {

using namespace models::llm;

// Tokens of one batched prompt pass. Larger chunks use the matmuls better; every chunk pays for
// all of them, so a short prompt wastes the padding.
constexpr int64_t kPromptChunk = 64;

// Rows of a verification pass (speculative decoding: the last accepted token and the proposals
// after it). Up to kExactVerifyRows tokens (the default --draft-max's passes) a pass runs a graph
// of exactly its rows: a CPU device such as lavapipe computes every row, padded or not, so 3
// tokens in a 4-row graph paid a quarter more (5 in 8, 9 in 16: more still). The graphs are
// compiled lazily, one per row count met, so at most kExactVerifyRows - 1 of them plus the
// padded ones (32, 64 rows) for longer drafts: a bound on the memory they hold.
constexpr int64_t kExactVerifyRows = 16;

int64_t verify_rows(int64_t n) {
  if (n <= kExactVerifyRows) return std::max<int64_t>(n, 2);
  int64_t rows = kExactVerifyRows;
  while (rows < n) rows *= 2;
  return rows;
}

HostTensor scalar_i32(int64_t v) {
  return HostTensor::from_i32({1}, std::vector<int32_t>{static_cast<int32_t>(v)});
}

}  // namespace

class LanguageModelImpl {
 public:
  LanguageModelImpl(Device device, const std::filesystem::path& path, const LanguageModelOptions& o)
      : device_(std::move(device)), options_(o) {
    const LoadOptions load = load_options(o, kPromptChunk);
    LoadedModel m = load_model(device_, path, load, "LanguageModel::load");
    config_ = std::move(m.config);
    tokenizer_ = std::move(m.tokenizer);
    chat_templates_ = std::move(m.chat_templates);
    weights_ = std::move(m.weights);
    caches_ = std::move(m.caches);
    context_ = m.context;
    cache_rows_ = m.cache_rows;
    kv_cache_ = m.kv_cache;
    try {
      decode_ = compile(1, Logits::last);
      prompt_last_ = compile(kPromptChunk, Logits::last);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::out_of_memory) throw;
      decode_.reset();
      weights_ = {};
      caches_ = {};
      rethrow_out_of_memory(device_, m.memory, load, "LanguageModel::load", e);
    }
  }

  const LanguageModelConfig& config() const { return config_; }
  const GgufTokenizer& tokenizer() const { return *tokenizer_; }
  const ModelChatTemplates& chat_templates() const { return chat_templates_; }
  int64_t context() const { return context_; }
  int64_t position() const { return position_; }
  const KvCacheInfo& kv_cache() const { return kv_cache_; }
  ExclusiveUse& in_use() { return in_use_; }
  ExecutorStats decode_stats() const { return decode_->stats(); }
  ExecutorStats prompt_stats() const { return prompt_last_->stats(); }

  std::vector<float> append(std::span<const int32_t> tokens, Logits logits, const char* call) {
    check(tokens, call);
    const int64_t n = static_cast<int64_t>(tokens.size()), vocab = config_.vocab_size;
    std::vector<float> out;
    if (logits == Logits::all) out.reserve(static_cast<size_t>(n * vocab));
    // All or nothing: a pass that fails (out of memory, a lost device) leaves position() where
    // the call found it, though earlier chunks of it went into the cache (rows past position()
    // are written again before they are read).
    const int64_t start = position_;
    try {
      for (int64_t first = 0; first < n;) {
        const int64_t count = std::min(kPromptChunk, n - first);
        // Chunks before the last only fill the caches where only the last token's logits are wanted.
        const Logits wanted = logits == Logits::last && first + count < n ? Logits::none : logits;
        std::vector<float> rows =
            logits_of(run(tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(count)), wanted), count, wanted);
        if (logits == Logits::all || first + count == n) out.insert(out.end(), rows.begin(), rows.end());
        first += count;
      }
    } catch (...) {
      position_ = start;
      throw;
    }
    return out;
  }

  // append() for Logits::last, with the last token's logits reduced to greedy decoding's choice
  // on the device (Logits::greedy): the chunks before the last only fill the caches, the last runs
  // through the greedy copy of its graph (the decode graph's for one token, the prompt chunk's
  // for more), so the choice is the argmax of the very logits append() returns.
  GreedyToken append_greedy(std::span<const int32_t> tokens) {
    check(tokens, "append_greedy");
    const int64_t n = static_cast<int64_t>(tokens.size()), start = position_;
    Executor* last = nullptr;
    try {
      for (int64_t first = 0; first < n;) {
        const int64_t count = std::min(kPromptChunk, n - first);
        last = &run(tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(count)),
                    first + count < n ? Logits::none : Logits::greedy);
        first += count;
      }
    } catch (...) {
      position_ = start;
      throw;
    }
    // {index, value bits, first non-finite index, its bits} (Graph::argmax), -1: none.
    const std::vector<int32_t> y = last->output("argmax").to_i32();
    return {y[0], std::bit_cast<float>(y[1]), y[2], std::bit_cast<float>(y[3])};
  }

  std::vector<OpTime> profile_decode(int32_t token) {
    const int32_t one[1] = {token};
    check(one, "profile_decode_step");
    if (!device_.info().timestamps)
      throw Error(ErrorCode::unsupported, "LanguageModel::profile_decode_step: the device (" +
                                              device_.info().name + ") has no timestamps");
    if (!decode_profiled_) decode_profiled_ = compile(1, Logits::last, {.profile = true});
    const int64_t p = position_;
    run(one, Logits::last, decode_profiled_.get());
    position_ = p;
    return decode_profiled_->profile();
  }

  // Speculative decoding's verification step: every token's logits from one pass of a graph of
  // verify_rows(n) rows (the decode graph for one token), so the rows agree with the prompt path's.
  std::vector<float> verify(std::span<const int32_t> tokens) {
    check(tokens, "verify");
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n > LanguageModel::kMaxVerifyTokens)
      throw Error(ErrorCode::invalid_argument, "LanguageModel::verify: " + std::to_string(n) +
                                                   " tokens, at most " +
                                                   std::to_string(LanguageModel::kMaxVerifyTokens) + " in one pass");
    if (n == 1) return logits_of(run(tokens, Logits::last), 1, Logits::last);
    const int64_t rows = verify_rows(n);
    std::unique_ptr<Executor>& e = verify_[rows];
    if (!e) e = compile(rows, Logits::all);
    return logits_of(run(tokens, Logits::all, e.get(), rows), n, Logits::all);
  }

  // Forgets the latest `count` tokens: the rows stay in the caches, hidden by key_length (and the
  // masks built from position_) until later tokens overwrite them, as truncate() does.
  void rollback(int64_t count) {
    if (count < 0 || count > position_)
      throw Error(ErrorCode::invalid_argument, "LanguageModel::rollback: count is " + std::to_string(count) +
                                                   ", expected 0.." + std::to_string(position_) +
                                                   " (the tokens in the cache)");
    position_ -= count;
  }

  void truncate(int64_t n) {
    if (n < 0 || n > position_)
      throw Error(ErrorCode::invalid_argument, "LanguageModel::truncate: n is " + std::to_string(n) +
                                                   ", expected 0.." + std::to_string(position_) +
                                                   " (the tokens in the cache)");
    position_ = n;  // later rows stay in the cache, hidden by key_length until overwritten
  }

  void shift(int64_t keep, int64_t discard) {
    if (keep < 0 || discard < 1 || keep + discard > position_)
      throw Error(ErrorCode::invalid_argument,
                  "LanguageModel::shift: keep " + std::to_string(keep) + " and discard " + std::to_string(discard) +
                      " must have keep >= 0, discard >= 1 and keep + discard <= " + std::to_string(position_) +
                      " (the tokens in the cache)");
    if (!shift_) shift_ = std::make_unique<Executor>(device_, build_shift(config_, weights_, caches_));
    shift_->set_input("shift", HostTensor::from_i32({3}, std::vector<int32_t>{static_cast<int32_t>(keep),
                                                                             static_cast<int32_t>(discard),
                                                                             static_cast<int32_t>(position_)}));
    shift_->run();
    position_ -= discard;
  }

 private:
  std::unique_ptr<Executor> compile(int64_t tokens, Logits logits, const CompileOptions& options = {}) {
    Graph g = build_forward(config_, weights_, caches_, tokens, logits, options_.activations);
    return std::make_unique<Executor>(device_, g, options);
  }

  void check(std::span<const int32_t> tokens, const char* call) const {
    const std::string what = std::string("LanguageModel::") + call;
    if (tokens.empty()) throw Error(ErrorCode::invalid_argument, what + ": no tokens");
    const int64_t n = static_cast<int64_t>(tokens.size()), left = context_ - position_;
    if (n > left)
      throw Error(ErrorCode::invalid_argument,
                  what + ": " + std::to_string(n) + " tokens do not fit in the " + std::to_string(left) +
                      " positions left of the context (" + std::to_string(context_) + ", " +
                      std::to_string(position_) + " used); truncate() or reset() first");
    models::check_token_ids(tokens, config_.vocab_size, what);
  }

  // The logits a pass of n tokens run by `e` returns: the last token's (Logits::last), every
  // token's (Logits::all), or none (Logits::none).
  std::vector<float> logits_of(Executor& e, int64_t n, Logits logits) const {
    if (logits == Logits::none) return {};
    std::vector<float> out = e.output("logits").to_f32();
    if (n > 1 && logits == Logits::all) out.resize(static_cast<size_t>(n * config_.vocab_size));
    return out;
  }

  // One pass over at most kPromptChunk tokens at position_; returns the executor that ran it,
  // whose output holds what `logits` asks for (logits_of, or append_greedy's "argmax"). A single
  // token runs through `graph` (the decode graph, or its profiled copy), or the decode graph's
  // greedy copy; several through the prompt chunk's graph for `logits`, or `graph` of
  // `graph_rows` rows (a verification pass's). The greedy copies are compiled on first use.
  Executor& run(std::span<const int32_t> tokens, Logits logits, Executor* graph = nullptr,
                int64_t graph_rows = kPromptChunk) {
    const int64_t n = static_cast<int64_t>(tokens.size()), p = position_;
    Executor* e = nullptr;
    const int64_t rows = n == 1 ? 1 : graph_rows;
    if (n == 1) {
      if (!graph && logits == Logits::greedy && !decode_greedy_) decode_greedy_ = compile(1, Logits::greedy);
      e = graph ? graph : logits == Logits::greedy ? decode_greedy_.get() : decode_.get();
      e->set_input("tokens", HostTensor::from_i32({1, 1}, tokens));
    } else {
      std::unique_ptr<Executor>& prompt = logits == Logits::all      ? prompt_all_
                                          : logits == Logits::none   ? prompt_caches_
                                          : logits == Logits::greedy ? prompt_greedy_
                                                                     : prompt_last_;
      if (!graph && !prompt) prompt = compile(kPromptChunk, logits);
      e = graph ? graph : prompt.get();
      std::vector<int32_t> padded(tokens.begin(), tokens.end());
      padded.resize(static_cast<size_t>(rows), 0);  // rows past n: computed, never seen
      e->set_input("tokens", HostTensor::from_i32({1, rows}, padded));
      if (logits == Logits::last || logits == Logits::greedy) e->set_input("last", scalar_i32(n - 1));
    }
    if (needs_mask(config_, rows)) e->set_input("mask", causal_mask(rows, cache_rows_, p));
    if (needs_window_mask(config_))
      e->set_input("window_mask", causal_mask(rows, cache_rows_, p, config_.sliding_window));
    e->set_input("position", scalar_i32(p));
    // p + rows: a chunk's attention is causal aligned to key_length (forward.hpp); its padded rows'
    // keys are then visible only to the padded rows themselves.
    e->set_input("key_length", scalar_i32(p + rows));
    e->run();
    position_ = p + n;
    return *e;
  }

  Device device_;
  LanguageModelOptions options_;
  LanguageModelConfig config_;
  std::unique_ptr<GgufTokenizer> tokenizer_;
  ModelChatTemplates chat_templates_;
  LanguageModelWeights weights_;
  KvCaches caches_;
  KvCacheInfo kv_cache_;
  int64_t context_ = 0, cache_rows_ = 0, position_ = 0;
  // prompt_all_, prompt_caches_ (Logits::none) and the greedy copies are compiled on first use:
  // the pipelines are prompt_last_'s and decode_'s (and the argmax kernel), so that costs little
  // JIT time.
  std::unique_ptr<Executor> decode_, prompt_last_, prompt_all_, prompt_caches_;
  std::unique_ptr<Executor> decode_greedy_, prompt_greedy_;
  std::unique_ptr<Executor> decode_profiled_;  // profile_decode_step's, compiled on first use
  std::map<int64_t, std::unique_ptr<Executor>> verify_;  // verification graphs by rows, on first use
  std::unique_ptr<Executor> shift_;            // shift()'s, compiled on first use
  ExclusiveUse in_use_{"LanguageModel"};
};

LanguageModel LanguageModel::load(Device& device, const std::filesystem::path& gguf,
                                  const LanguageModelOptions& options) {
  return LanguageModel(std::make_unique<LanguageModelImpl>(device, gguf, options));
}

LanguageModel::LanguageModel(std::unique_ptr<LanguageModelImpl> impl) : impl_(std::move(impl)) {}
LanguageModel::~LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;
LanguageModel& LanguageModel::operator=(LanguageModel&&) noexcept = default;

LanguageModelImpl& LanguageModel::impl() const {
  if (!impl_) throw Error(ErrorCode::invalid_argument, "LanguageModel: used after it was moved from");
  return *impl_;
}

const LanguageModelConfig& LanguageModel::config() const { return impl().config(); }
const GgufTokenizer& LanguageModel::tokenizer() const { return impl().tokenizer(); }
const ModelChatTemplates& LanguageModel::chat_templates() const { return impl().chat_templates(); }
KvCacheInfo LanguageModel::kv_cache() const { return impl().kv_cache(); }
int64_t LanguageModel::context() const { return impl().context(); }
int64_t LanguageModel::position() const { return impl().position(); }

std::vector<float> LanguageModel::append(std::span<const int32_t> tokens) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::append");
  return impl().append(tokens, Logits::last, "append");
}

GreedyToken LanguageModel::append_greedy(std::span<const int32_t> tokens) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::append_greedy");
  return impl().append_greedy(tokens);
}

std::vector<float> LanguageModel::append_all_logits(std::span<const int32_t> tokens) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::append_all_logits");
  return impl().append(tokens, Logits::all, "append_all_logits");
}

int64_t LanguageModel::verify_graph_rows(int64_t n) { return n <= 1 ? 1 : verify_rows(n); }

std::vector<float> LanguageModel::verify(std::span<const int32_t> tokens) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::verify");
  return impl().verify(tokens);
}

void LanguageModel::rollback(int64_t count) { impl().rollback(count); }

ExecutorStats LanguageModel::decode_step_stats() const { return impl().decode_stats(); }
ExecutorStats LanguageModel::prompt_chunk_stats() const { return impl().prompt_stats(); }
int64_t LanguageModel::prompt_chunk() const { return kPromptChunk; }

std::vector<OpTime> LanguageModel::profile_decode_step(int32_t token) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::profile_decode_step");
  return impl().profile_decode(token);
}

void LanguageModel::reset() { impl().truncate(0); }
void LanguageModel::truncate(int64_t n) { impl().truncate(n); }

void LanguageModel::shift(int64_t keep, int64_t discard) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "LanguageModel::shift");
  impl().shift(keep, discard);
}

}  // namespace vkformer
