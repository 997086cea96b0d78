// BatchedLanguageModel (vkformer/batched_llm.hpp): one copy of a decoder-only GGUF's weights, KV caches
// of [slots + 1, n_kv_heads, T, head_dim] per layer, and build_forward's graphs over SlotRows:
// prompt-piece graphs (one sequence, its slot an input) of 16, 32 and 64 tokens, recorded at
// their first use, and one step per bucket of rows: up to `logit_rows` (default: `slots`) rows a
// step returns every row's logits; above, a step (tokens of prompts among them) returns those of
// `logit_rows` chosen rows (SlotRows::logit_rows): a piece's last token, or every token of a
// piece that verifies speculative proposals. Sliding-window layers take a window mask row per sequence
// (step_window_mask); soft-capped attention (Gemma 2) is capped inside the attention kernel.
// The last slot is scratch: padding rows of a bucket write there, never into a sequence's slot.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "exclusive_use.hpp"
#include "llm/config.hpp"
#include "llm/forward.hpp"
#include "llm/loaded_model.hpp"
#include "llm/weights.hpp"
#include "token_ids.hpp"
#include "vkformer/batched_llm.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer {

namespace {

using namespace models::llm;

// As LanguageModel's: tokens of one prompt pass, and the cache length the options may leave.
constexpr int64_t kPromptChunk = 64;
// Prompt passes are recorded for these widths too, and a piece of n tokens runs the narrowest
// that holds it: a server's short prompts (and last pieces) pay for 16 or 32 rows, not 64.
constexpr int64_t kPromptWidths[] = {16, 32, kPromptChunk};
constexpr int kMaxSlots = 256;
constexpr int64_t kMaxStepTokens = 4096;

HostTensor i32(std::vector<int32_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return HostTensor::from_i32({n}, v);
}

}  // namespace

class BatchedLanguageModelImpl {
 public:
  BatchedLanguageModelImpl(Device device, const std::filesystem::path& path,
                           const BatchedLanguageModelOptions& o)
      : device_(std::move(device)), options_(o) {
    const std::string what = "BatchedLanguageModel::load";
    if (o.slots < 1 || o.slots > kMaxSlots)
      throw Error(ErrorCode::invalid_argument, what + ": slots is " + std::to_string(o.slots) +
                                                   ", expected 1 to " + std::to_string(kMaxSlots));
    if (o.step_tokens != 0 && (o.step_tokens < o.slots || o.step_tokens > kMaxStepTokens))
      throw Error(ErrorCode::invalid_argument, what + ": step_tokens is " + std::to_string(o.step_tokens) +
                                                   ", expected 0 or " + std::to_string(o.slots) +
                                                   " (slots) to " + std::to_string(kMaxStepTokens));
    step_rows_ = o.step_tokens == 0 ? o.slots : o.step_tokens;
    if (o.logit_rows != 0 && (o.logit_rows < o.slots || o.logit_rows > step_rows_))
      throw Error(ErrorCode::invalid_argument, what + ": logit_rows is " + std::to_string(o.logit_rows) +
                                                   ", expected 0 or " + std::to_string(o.slots) + " (slots) to " +
                                                   std::to_string(step_rows_) + " (step_tokens)");
    logit_rows_ = o.logit_rows == 0 ? o.slots : o.logit_rows;
    const LoadOptions load = load_options(o, kPromptChunk, o.slots + 1);  // the last slot: scratch for padding rows
    LoadedModel m = load_model(device_, path, load, what);
    config_ = std::move(m.config);
    tokenizer_ = std::move(m.tokenizer);
    chat_templates_ = std::move(m.chat_templates);
    weights_ = std::move(m.weights);
    caches_ = std::move(m.caches);
    context_ = m.context;
    cache_rows_ = m.cache_rows;
    kv_cache_ = m.kv_cache;
    positions_.assign(static_cast<size_t>(o.slots), 0);
  }

  const LanguageModelConfig& config() const { return config_; }
  const GgufTokenizer& tokenizer() const { return *tokenizer_; }
  const ModelChatTemplates& chat_templates() const { return chat_templates_; }
  int slots() const { return options_.slots; }
  int64_t context() const { return context_; }
  const KvCacheInfo& kv_cache() const { return kv_cache_; }
  int64_t position(int slot) const { return positions_[checked(slot, "position")]; }
  void reset(int slot) { positions_[checked(slot, "reset")] = 0; }
  void truncate(int slot, int64_t length) {
    const size_t s = checked(slot, "truncate");
    if (length < 0 || length > positions_[s])
      throw Error(ErrorCode::invalid_argument, "BatchedLanguageModel::truncate: length " + std::to_string(length) +
                                                   " is outside [0, " + std::to_string(positions_[s]) + "] (slot " +
                                                   std::to_string(slot) + "'s tokens)");
    positions_[s] = length;
  }
  // The slot's context shift: build_slot_shift's graph (recorded at the first shift), which moves
  // the rows of that slot alone.
  void shift(int slot, int64_t keep, int64_t discard) {
    const size_t s = checked(slot, "shift");
    const int64_t end = positions_[s];
    if (keep < 0 || discard < 1 || keep + discard > end)
      throw Error(ErrorCode::invalid_argument,
                  "BatchedLanguageModel::shift: keep " + std::to_string(keep) + " and discard " +
                      std::to_string(discard) + " must have keep >= 0, discard >= 1 and keep + discard <= " +
                      std::to_string(end) + " (slot " + std::to_string(slot) + "'s tokens)");
    record_shift();
    shift_->set_input("shift", i32({static_cast<int32_t>(keep), static_cast<int32_t>(discard), static_cast<int32_t>(end),
                                    static_cast<int32_t>(slot)}));
    shift_->run();
    positions_[s] = end - discard;
  }
  void record_shift() {
    if (!shift_) shift_ = std::make_unique<Executor>(device_, build_slot_shift(config_, weights_, caches_));
  }
  int64_t step_rows() const { return step_rows_; }
  int64_t logit_rows() const { return logit_rows_; }
  ExclusiveUse& in_use() { return in_use_; }

  int decode_rows(int sequences) const {
    int rows = 1;
    while (rows < sequences) rows *= 2;
    return std::min(rows, options_.slots);
  }

  int64_t step_bucket(int64_t rows) const {
    if (rows < 1 || rows > step_rows_)
      throw Error(ErrorCode::invalid_argument, "BatchedLanguageModel::step_bucket: rows is " + std::to_string(rows) +
                                                   ", expected 1 to " + std::to_string(step_rows_));
    if (rows <= options_.slots) return decode_rows(static_cast<int>(rows));
    // Powers of two up to 32 rows, then multiples of 16 up to 64 (a server's decoding rows and one
    // short prompt, ~40 rows, take 48, not 64), then multiples of 64: a step pads less than a chunk.
    int64_t bucket = 1;
    while (bucket < rows && bucket < 32) bucket *= 2;
    if (bucket < rows) bucket = rows <= 64 ? (rows + 15) / 16 * 16 : (rows + 63) / 64 * 64;
    return std::min(bucket, step_rows_);
  }

  void record_steps() {
    for (int64_t rows = 1; rows <= step_rows_; rows = step_bucket(rows) + 1) graph(step_bucket(rows));
  }

  ExecutorStats decode_stats(int sequences) {
    if (sequences < 1 || sequences > options_.slots)
      throw Error(ErrorCode::invalid_argument, "BatchedLanguageModel::decode_step_stats: sequences is " +
                                                   std::to_string(sequences) + ", expected 1 to " +
                                                   std::to_string(options_.slots));
    return graph(decode_rows(sequences)).stats();
  }

  std::vector<float> append(int slot, std::span<const int32_t> tokens) {
    const std::string what = "BatchedLanguageModel::append";
    const size_t s = checked(slot, "append");
    if (tokens.empty()) throw Error(ErrorCode::invalid_argument, what + ": no tokens");
    check_room(slot, static_cast<int64_t>(tokens.size()), what);
    check_ids(tokens, what);
    std::vector<float> logits;
    for (size_t first = 0; first < tokens.size();) {
      const size_t n = std::min<size_t>(kPromptChunk, tokens.size() - first);
      const int64_t p = positions_[s];
      if (n == 1) {  // one token: the one-row step, no padded chunk
        const Next one{slot, tokens[first]};
        logits = decode({&one, 1});
      } else {
        const int64_t width = *std::find_if(std::begin(kPromptWidths), std::end(kPromptWidths),
                                            [&](int64_t w) { return w >= static_cast<int64_t>(n); });
        std::unique_ptr<Executor>& recorded = prompts_[width];
        if (!recorded) recorded = compile(1, width);
        Executor* prompt = recorded.get();
        std::vector<int32_t> padded(tokens.begin() + static_cast<std::ptrdiff_t>(first),
                                    tokens.begin() + static_cast<std::ptrdiff_t>(first + n));
        padded.resize(static_cast<size_t>(width), 0);  // rows past n: computed, never seen
        prompt->set_input("tokens", HostTensor::from_i32({1, width}, padded));
        prompt->set_input("mask", causal_mask(width, cache_rows_, p));
        if (needs_window_mask(config_))
          prompt->set_input("window_mask", causal_mask(width, cache_rows_, p, config_.sliding_window));
        prompt->set_input("last", i32({static_cast<int32_t>(n - 1)}));
        prompt->set_input("slot", i32({slot}));
        prompt->set_input("position", i32({static_cast<int32_t>(p)}));
        prompt->set_input("key_length", i32({static_cast<int32_t>(p + static_cast<int64_t>(n))}));
        prompt->run();
        positions_[s] = p + static_cast<int64_t>(n);
        logits = prompt->output("logits").to_f32();
      }
      first += n;
    }
    return logits;
  }

  using Next = BatchedLanguageModel::Next;

  std::vector<float> decode(std::span<const Next> batch) {
    const std::string what = "BatchedLanguageModel::decode";
    const int n = static_cast<int>(batch.size());
    if (batch.empty() || n > options_.slots)
      throw Error(ErrorCode::invalid_argument, what + ": " + std::to_string(batch.size()) +
                                                   " sequences, expected 1 to " +
                                                   std::to_string(options_.slots) + " (the slots)");
    std::vector<Piece> pieces;
    pieces.reserve(batch.size());
    for (const Next& x : batch) pieces.push_back({x.slot, {&x.token, 1}, true});
    return run(pieces, "decode");
  }

  using Piece = BatchedLanguageModel::Piece;

  std::vector<float> step(std::span<const Piece> pieces) {
    const std::string what = "BatchedLanguageModel::step";
    if (pieces.empty() || pieces.size() > static_cast<size_t>(options_.slots))
      throw Error(ErrorCode::invalid_argument, what + ": " + std::to_string(pieces.size()) +
                                                   " pieces, expected 1 to " + std::to_string(options_.slots) +
                                                   " (the slots)");
    return run(pieces, "step");
  }

 private:
  // Checks the pieces (nothing moves if one is refused), runs them as the rows of one bucket's
  // step and returns the wanted logits.
  std::vector<float> run(std::span<const Piece> pieces, const char* call) {
    const std::string what = std::string("BatchedLanguageModel::") + call;
    std::vector<size_t> entry(static_cast<size_t>(options_.slots), SIZE_MAX);  // where each slot is listed
    int64_t total = 0, wanted_rows = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& x = pieces[i];
      const size_t s = checked(x.slot, call);
      if (entry[s] != SIZE_MAX)
        throw Error(ErrorCode::invalid_argument, what + ": slot " + std::to_string(x.slot) +
                                                     " is listed twice (entries " + std::to_string(entry[s]) +
                                                     " and " + std::to_string(i) + ")");
      entry[s] = i;
      if (x.tokens.empty())
        throw Error(ErrorCode::invalid_argument, what + ": piece " + std::to_string(i) + " (slot " +
                                                     std::to_string(x.slot) + ") has no tokens");
      check_room(x.slot, static_cast<int64_t>(x.tokens.size()), what);
      check_ids(x.tokens, what + " (slot " + std::to_string(x.slot) + ")");
      total += static_cast<int64_t>(x.tokens.size());
      wanted_rows += x.every_logit ? static_cast<int64_t>(x.tokens.size()) : x.logits ? 1 : 0;
    }
    if (total > step_rows_)
      throw Error(ErrorCode::invalid_argument, what + ": " + std::to_string(total) + " tokens, more than the " +
                                                   std::to_string(step_rows_) + " a step carries (step_tokens)");
    if (wanted_rows > logit_rows_)
      throw Error(ErrorCode::invalid_argument, what + ": the logits of " + std::to_string(wanted_rows) +
                                                   " rows wanted, more than the " + std::to_string(logit_rows_) +
                                                   " a step returns (logit_rows)");
    const int64_t rows = step_bucket(total);
    Executor& e = graph(rows);
    // Padding rows: token 0 at position 0 of the scratch slot, seeing that one key.
    const size_t r = static_cast<size_t>(rows);
    std::vector<int32_t> tokens(r, 0), slot(r, options_.slots), position(r, 0), key_length(r, 1), wanted;
    size_t row = 0;
    for (const Piece& x : pieces) {
      const int64_t p = positions_[static_cast<size_t>(x.slot)];
      for (size_t t = 0; t < x.tokens.size(); ++t, ++row) {
        tokens[row] = x.tokens[t];
        slot[row] = x.slot;
        position[row] = static_cast<int32_t>(p + static_cast<int64_t>(t));
        key_length[row] = static_cast<int32_t>(p + static_cast<int64_t>(t) + 1);
        if (x.every_logit) wanted.push_back(static_cast<int32_t>(row));
      }
      if (x.logits && !x.every_logit) wanted.push_back(static_cast<int32_t>(row - 1));
    }
    e.set_input("tokens", HostTensor::from_i32({rows, 1}, tokens));
    e.set_input("slot", i32(slot));
    e.set_input("position", i32(position));
    e.set_input("key_length", i32(key_length));
    if (needs_window_mask(config_))
      e.set_input("window_mask", step_window_mask(position, cache_rows_, config_.sliding_window));
    const bool gathered = rows > logit_rows_;  // the head runs on `logit_rows` chosen rows only
    if (gathered) {
      std::vector<int32_t> gather(wanted);
      gather.resize(static_cast<size_t>(logit_rows_), 0);
      e.set_input("logit_rows", i32(gather));
    }
    e.run();
    for (const Piece& x : pieces) positions_[static_cast<size_t>(x.slot)] += static_cast<int64_t>(x.tokens.size());
    if (wanted.empty()) return {};
    std::vector<float> all = e.output("logits").to_f32();
    const size_t vocab = static_cast<size_t>(config_.vocab_size);
    if (gathered) {
      all.resize(wanted.size() * vocab);
      return all;
    }
    std::vector<float> logits(wanted.size() * vocab);
    for (size_t i = 0; i < wanted.size(); ++i)
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(wanted[i]) * vocab), vocab,
                  logits.begin() + static_cast<std::ptrdiff_t>(i * vocab));
    return logits;
  }

  std::unique_ptr<Executor> compile(int64_t batch, int64_t tokens) {
    SlotRows rows{batch};
    if (tokens == 1 && batch > logit_rows_) rows.logit_rows = logit_rows_;
    Graph g = build_forward(config_, weights_, caches_, tokens, Logits::last, options_.activations, &rows);
    return std::make_unique<Executor>(device_, g);
  }

  // The step graph of `rows` rows, recorded on first use.
  Executor& graph(int64_t rows) {
    std::unique_ptr<Executor>& e = steps_[rows];
    if (!e) e = compile(rows, 1);
    return *e;
  }

  size_t checked(int slot, const char* call) const {
    if (slot < 0 || slot >= options_.slots)
      throw Error(ErrorCode::invalid_argument, std::string("BatchedLanguageModel::") + call + ": slot " +
                                                   std::to_string(slot) + " is outside [0, " +
                                                   std::to_string(options_.slots) + ")");
    return static_cast<size_t>(slot);
  }

  void check_room(int slot, int64_t n, const std::string& what) const {
    const int64_t p = positions_[static_cast<size_t>(slot)], left = context_ - p;
    if (n > left)
      throw Error(ErrorCode::invalid_argument,
                  what + ": " + std::to_string(n) + " tokens do not fit in the " + std::to_string(left) +
                      " positions left of slot " + std::to_string(slot) + "'s context (" +
                      std::to_string(context_) + ", " + std::to_string(p) + " used); reset() it first");
  }

  void check_ids(std::span<const int32_t> tokens, const std::string& what) const {
    models::check_token_ids(tokens, config_.vocab_size, what);
  }

  Device device_;
  BatchedLanguageModelOptions options_;
  LanguageModelConfig config_;
  std::unique_ptr<GgufTokenizer> tokenizer_;
  ModelChatTemplates chat_templates_;
  LanguageModelWeights weights_;
  KvCaches caches_;
  int64_t context_ = 0, cache_rows_ = 0;
  KvCacheInfo kv_cache_;
  std::vector<int64_t> positions_;  // per slot
  std::map<int64_t, std::unique_ptr<Executor>> prompts_;  // by width (kPromptWidths)
  std::map<int64_t, std::unique_ptr<Executor>> steps_;  // by rows
  std::unique_ptr<Executor> shift_;  // shift()'s, recorded at the first shift
  int64_t step_rows_ = 0, logit_rows_ = 0;
  ExclusiveUse in_use_{"BatchedLanguageModel"};
};

BatchedLanguageModel BatchedLanguageModel::load(Device& device, const std::filesystem::path& gguf,
                                                const BatchedLanguageModelOptions& options) {
  return BatchedLanguageModel(std::make_unique<BatchedLanguageModelImpl>(device, gguf, options));
}

BatchedLanguageModel::BatchedLanguageModel(std::unique_ptr<BatchedLanguageModelImpl> impl)
    : impl_(std::move(impl)) {}
BatchedLanguageModel::~BatchedLanguageModel() = default;
BatchedLanguageModel::BatchedLanguageModel(BatchedLanguageModel&&) noexcept = default;
BatchedLanguageModel& BatchedLanguageModel::operator=(BatchedLanguageModel&&) noexcept = default;

BatchedLanguageModelImpl& BatchedLanguageModel::impl() const {
  if (!impl_) throw Error(ErrorCode::invalid_argument, "BatchedLanguageModel: used after it was moved from");
  return *impl_;
}

const LanguageModelConfig& BatchedLanguageModel::config() const { return impl().config(); }
const GgufTokenizer& BatchedLanguageModel::tokenizer() const { return impl().tokenizer(); }
const ModelChatTemplates& BatchedLanguageModel::chat_templates() const { return impl().chat_templates(); }
int BatchedLanguageModel::slots() const { return impl().slots(); }
int64_t BatchedLanguageModel::context() const { return impl().context(); }
KvCacheInfo BatchedLanguageModel::kv_cache() const { return impl().kv_cache(); }
int64_t BatchedLanguageModel::position(int slot) const { return impl().position(slot); }
void BatchedLanguageModel::reset(int slot) { impl().reset(slot); }
void BatchedLanguageModel::truncate(int slot, int64_t length) { impl().truncate(slot, length); }
void BatchedLanguageModel::shift(int slot, int64_t keep, int64_t discard) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::shift");
  impl().shift(slot, keep, discard);
}
int64_t BatchedLanguageModel::step_rows() const { return impl().step_rows(); }
int64_t BatchedLanguageModel::logit_rows() const { return impl().logit_rows(); }
int64_t BatchedLanguageModel::step_bucket(int64_t rows) const { return impl().step_bucket(rows); }
int BatchedLanguageModel::decode_rows(int sequences) const { return impl().decode_rows(sequences); }

std::vector<float> BatchedLanguageModel::append(int slot, std::span<const int32_t> tokens) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::append");
  return impl().append(slot, tokens);
}

std::vector<float> BatchedLanguageModel::decode(std::span<const Next> batch) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::decode");
  return impl().decode(batch);
}

std::vector<float> BatchedLanguageModel::step(std::span<const Piece> pieces) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::step");
  return impl().step(pieces);
}

void BatchedLanguageModel::record_steps() {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::record_steps");
  impl().record_steps();
}

void BatchedLanguageModel::record_shift() {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::record_shift");
  impl().record_shift();
}

ExecutorStats BatchedLanguageModel::decode_step_stats(int sequences) {
  ExclusiveUse::Scope one_thread(impl().in_use(), "BatchedLanguageModel::decode_step_stats");
  return impl().decode_stats(sequences);
}

}  // namespace vkformer
