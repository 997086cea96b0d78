#pragma once
// The KV slots the scheduler runs its steps in: `count` sequences, each with its own cache of
// `context` tokens, and steps of up to `step_tokens` tokens from any of them (every decoding
// sequence's next token and chunks of prompts, as rows of one pass).
//
// One BatchedLanguageModel holds the weights once and a slot per sequence; step() runs the
// step's pieces as the rows of one batched graph (one matmul with a row per token, each row's
// attention over its own slot up to itself), so a step costs about one pass of its rows, not a
// pass per sequence.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "draft_slots.hpp"
#include "vkformer/batched_llm.hpp"
#include "vkformer/device.hpp"

namespace vkformer::server {

class SequenceSlots {
 public:
  // cache_type_k/v: the KV cache's types (BatchedLanguageModelOptions); unset: the activations'.
  // context_shift: the slots will be shifted (--context-shift), so the shift is recorded now too.
  // draft_max: proposals a decoding sequence may add to its row (speculative decoding; 0: none),
  // whose logits a step then returns too (up to count * (1 + draft_max) rows, at most step_tokens).
  // draft: a draft model of the same vocabulary (serve --model-draft), loaded beside the target
  // on its device (DraftSlots); its errors name the file and --model-draft.
  SequenceSlots(Device device, const std::filesystem::path& gguf, int count, int64_t context, int64_t step_tokens,
                std::optional<DType> cache_type_k = std::nullopt, std::optional<DType> cache_type_v = std::nullopt,
                bool kv_rotation = true, bool context_shift = false, int64_t draft_max = 0,
                const std::filesystem::path& draft = {});

  int count() const { return model_.slots(); }
  int64_t context() const { return model_.context(); }
  int64_t step_tokens() const { return model_.step_rows(); }
  int64_t logit_rows() const { return model_.logit_rows(); }  // the most logits rows a step returns
  int64_t position(int slot) const { return model_.position(slot); }
  const BatchedLanguageModel& model() const { return model_; }
  DraftSlots* draft() { return draft_.get(); }  // null without a draft model
  // The device was lost (by a step here or by another of its users): the slots cannot be used
  // again; the scheduler drops them and loads the model anew.
  bool device_lost() const { return device_.lost(); }

  // Keeps the slot's first `length` cached tokens (a prefix the next sequence shares); 0: empty.
  void truncate(int slot, int64_t length) { model_.truncate(slot, length); }
  // The slot's context shift (BatchedLanguageModel::shift): tokens [keep, keep + discard) forgotten.
  void shift(int slot, int64_t keep, int64_t discard) { model_.shift(slot, keep, discard); }
  using Piece = BatchedLanguageModel::Piece;
  // One pass over the pieces; the logits of those that want them, one vector each, in order.
  std::vector<std::vector<float>> step(std::span<const Piece> pieces);

 private:
  Device device_;
  BatchedLanguageModel model_;
  std::unique_ptr<DraftSlots> draft_;
};

}  // namespace vkformer::server
