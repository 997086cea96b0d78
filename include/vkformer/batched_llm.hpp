#pragma once
// A language model that decodes many sequences at once (continuous batching, as `vkformer serve`
// does): the weights on the device once, a KV cache with one slot per sequence, and a batched
// decoding step that takes one new token from each of up to slots() sequences in ONE pass: one
// matmul with a row per sequence (the weights read once per step), each row's RoPE position, cache
// write and attention in its own slot over its own length. A sequence's prompt goes in through
// append() in chunks against its slot, between other sequences' steps. Each row's logits equal
// those of the same tokens run alone through a LanguageModel, to fp32 rounding, in every family:
// sliding-window layers see the last `sliding_window` positions of the row's own slot, and
// Gemma 2's attention is soft-capped per row over its slot and length.
//
//   auto lm = vkformer::BatchedLanguageModel::load(device, "SmolLM2.gguf", {.slots = 8});
//   std::vector<float> a = lm.append(0, prompt_a);   // slot 0's next-token logits
//   std::vector<float> b = lm.append(1, prompt_b);
//   std::vector<float> both = lm.decode({{{0, next_a}, {1, next_b}}});  // [2 x vocab]
//
// A step can also carry several tokens of a slot (step(): a server's decoding sequences and
// chunks of waiting prompts in one pass, as llama.cpp's batches and vLLM's chunked prefill do):
// each token is a row at its slot's next position, seeing the rows of its own slot before it.
// A slot's cache can be cut back to a prefix (truncate()) and continued from there: prefix
// caching reuses the rows of a prompt that an earlier sequence in that slot shared. A slot whose
// sequence fills its context can be shifted (shift(), llama-server's --context-shift).
//
// Steps are recorded once per bucket of rows (1, 2, 4, 8, ... up to slots(); above that powers
// of two up to 32, 48, 64, then multiples of 64 up to step_rows()) and replayed; a step of n rows runs the smallest
// bucket >= n, its padding rows writing only a scratch slot. Errors are vkformer::Error (invalid_argument naming the slot, token or count). One
// BatchedLanguageModel is used by one thread at a time.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/dtype.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

struct BatchedLanguageModelOptions {
  DType activations = DType::f32;  // f16: activations and the KV cache stored in f16
  int64_t context = 0;  // tokens each slot holds; 0: the model's context_length capped at 4096
  int slots = 8;        // sequences decoded together, 1 to 256
  // The most rows one step() carries (decoding tokens and prompt tokens together), slots to
  // 4096; 0: slots (steps of one token per sequence only).
  int64_t step_tokens = 0;
  // The KV cache's types, K and V apart (LanguageModelOptions); unset: the activations'.
  std::optional<DType> cache_type_k, cache_type_v;
  bool kv_rotation = true;  // LanguageModelOptions::kv_rotation
  // The most logits rows one step() returns, slots to step_tokens; 0: slots (one per piece). A
  // server verifying speculative proposals wants every row of a slot's piece (Piece::
  // every_logit); a step of more rows than this runs the output head (the largest matmul) on
  // this many chosen rows only.
  int64_t logit_rows = 0;
};

class BatchedLanguageModelImpl;

class BatchedLanguageModel {
 public:
  static BatchedLanguageModel load(Device& device, const std::filesystem::path& gguf,
                                   const BatchedLanguageModelOptions& options = {});
  ~BatchedLanguageModel();
  BatchedLanguageModel(BatchedLanguageModel&&) noexcept;
  BatchedLanguageModel& operator=(BatchedLanguageModel&&) noexcept;

  const LanguageModelConfig& config() const;
  const GgufTokenizer& tokenizer() const;
  const ModelChatTemplates& chat_templates() const;  // as LanguageModel::chat_templates()
  int slots() const;
  int64_t context() const;            // tokens one slot holds
  KvCacheInfo kv_cache() const;       // the caches' types and sizes (every slot's)
  int64_t position(int slot) const;   // tokens in the slot's cache now

  void reset(int slot);  // position(slot) = 0: the slot is free for a new sequence
  // Keeps the slot's first `length` tokens (0 <= length <= position(slot)) and forgets the rest:
  // the next token goes at position `length`, seeing those rows as they were computed.
  void truncate(int slot, int64_t length);
  // The context shift of one slot (LanguageModel::shift's, llama-server's): forgets the slot's
  // tokens at [keep, keep + discard) and moves its later rows down by `discard`, their keys turned
  // to their new positions, so that its sequence goes on without running the kept tokens again;
  // position(slot) -= discard. The other slots' rows are not touched. Each moved row equals what
  // LanguageModel::shift gives the same tokens alone. keep >= 0, discard >= 1 and keep + discard
  // <= position(slot), else invalid_argument naming them.
  void shift(int slot, int64_t keep, int64_t discard);
  // Runs `tokens` at the slot's positions [position, position + n) in prompt-sized passes and
  // returns the last one's logits [vocab]; as LanguageModel::append (same errors), in one slot.
  std::vector<float> append(int slot, std::span<const int32_t> tokens);

  struct Next {
    int slot;
    int32_t token;
  };
  // One new token for each listed slot (distinct slots, each with room left), in one batched
  // pass; returns their logits [batch.size() x vocab], row i for batch[i].
  std::vector<float> decode(std::span<const Next> batch);

  // Tokens of one slot in a step(): appended at its positions [position, position + n), in
  // order; `logits`: the last one's logits are wanted; `every_logit`: every token's (speculative
  // verification: the slot's last accepted token and the proposals after it, each row giving the
  // logits that judge the next proposal; truncate() then forgets the rejected ones).
  struct Piece {
    int slot;
    std::span<const int32_t> tokens;
    bool logits = false;
    bool every_logit = false;
  };
  // One batched pass over pieces of distinct slots, at most step_rows() tokens in all, each piece
  // with room left in its slot. Returns the logits of the pieces with `logits` (one row) or
  // `every_logit` (a row per token), in their order ([k x vocab], k at most logit_rows()); each
  // equals what append() gives for the same tokens, to fp32 rounding. A refused step moves no
  // slot.
  std::vector<float> step(std::span<const Piece> pieces);
  int64_t step_rows() const;  // the most tokens a step() carries (options' step_tokens, >= slots)
  int64_t logit_rows() const;  // the most logits rows a step() returns (options' logit_rows, >= slots)

  // The rows of the bucket a step of `sequences` runs (sequences rounded up to a power of two,
  // at most slots()).
  int decode_rows(int sequences) const;
  // The same for a step() of `rows` tokens: decode_rows up to slots(), then the next of the
  // powers of two up to 32, 48, 64 and the multiples of 64 (at most step_rows()).
  int64_t step_bucket(int64_t rows) const;
  // Records every bucket's step now (as their first use would), so that no step later waits
  // while its kernels are compiled.
  void record_steps();
  // Records shift()'s graph now (as the first shift would): a server with context shift does, so
  // that the first sequence to fill its context does not wait while its kernels are compiled.
  void record_shift();
  // What a step of `sequences` executes, counted from its recording (recorded here if it was
  // not yet): dispatches, barriers, weight bytes read.
  ExecutorStats decode_step_stats(int sequences);

 private:
  explicit BatchedLanguageModel(std::unique_ptr<BatchedLanguageModelImpl> impl);
  BatchedLanguageModelImpl& impl() const;  // throws on a moved-from object
  std::unique_ptr<BatchedLanguageModelImpl> impl_;
};

}  // namespace vkformer
