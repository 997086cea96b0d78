#pragma once
// A draft model for the scheduler's sequences (serve --model-draft): one BatchedLanguageModel of
// the draft with a slot per sequence slot, each holding a prefix of its sequence's text. The slot
// keeps its tokens across steps and requests, so only what is new runs (the last accepted
// tokens; a new prompt after the prefix it shares with the slot's last sequence, as the target's
// prefix cache). Proposals for all decoding sequences are made together: their new tokens in
// batched steps, then one batched step per proposed token, each sequence taking the draft's top
// token while its probability (softmax at temperature 1) is at least p_min, as
// DraftModelProposer does for generate().
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "vkformer/batched_llm.hpp"
#include "vkformer/device.hpp"

namespace vkformer::server {

class DraftSlots {
 public:
  // The draft loaded with `count` slots of the target's `context` (or its own, where shorter) and
  // steps of `step_tokens`; BatchedLanguageModel::load's errors.
  DraftSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context, int64_t step_tokens,
             const BatchedLanguageModelOptions& cache_types);
  const BatchedLanguageModel& model() const { return model_; }

  struct Want {
    int slot;
    std::span<const int32_t> text;  // the sequence's prompt and reply so far, its next token last
    int64_t most;                   // proposals wanted at most (0: none)
  };
  // The proposals after each text (fewer where the draft is unsure or its slot is full). A failed
  // draft step proposes nothing (and the slots start again from their texts next time): the
  // target's step, which follows, finds what went wrong with the device.
  std::vector<std::vector<int32_t>> propose(std::span<const Want> wants, float p_min);

 private:
  void run(std::span<const Want> wants, float p_min, std::vector<std::vector<int32_t>>& out);
  BatchedLanguageModel model_;
  std::vector<std::vector<int32_t>> cached_;  // per slot: the tokens in the draft's cache
  std::vector<std::vector<float>> logits_;    // per slot: the draft's logits after them (empty: unknown)
};

}  // namespace vkformer::server
