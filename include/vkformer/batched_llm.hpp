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
// Steps are recorded once per batch size bucket (1, 2, 4, 8, ... up to slots()) and replayed; a
// step of n sequences runs the smallest bucket >= n, its padding rows writing only a scratch
// slot. Errors are vkformer::Error (invalid_argument naming the slot, token or count). One
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
  int slots() const;
  int64_t context() const;            // tokens one slot holds
  int64_t position(int slot) const;   // tokens in the slot's cache now

  void reset(int slot);  // position(slot) = 0: the slot is free for a new sequence
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

  // The rows of the bucket a step of `sequences` runs (sequences rounded up to a power of two,
  // at most slots()).
  int decode_rows(int sequences) const;
  // What a step of `sequences` executes, counted from its recording (recorded here if it was
  // not yet): dispatches, barriers, weight bytes read.
  ExecutorStats decode_step_stats(int sequences);

 private:
  explicit BatchedLanguageModel(std::unique_ptr<BatchedLanguageModelImpl> impl);
  BatchedLanguageModelImpl& impl() const;  // throws on a moved-from object
  std::unique_ptr<BatchedLanguageModelImpl> impl_;
};

}  // namespace vkformer
