#pragma once
// The KV slots the scheduler decodes in: `count` sequences, each with its own cache of
// `context` tokens, filled in prompt chunks and then one token per step.
//
// Today each slot is its own LanguageModel (weights loaded once per slot) and a step runs the
// slots' one-token passes one after the other, so a step costs the sum of its sequences. This
// class is the one place that changes when the model gets a batched decode step (one matmul with
// a row per slot, attention over each slot's own length): decode() is already called with every
// decoding slot of the step at once.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::server {

class SequenceSlots {
 public:
  SequenceSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context);

  int count() const { return static_cast<int>(models_.size()); }
  int64_t context() const { return models_.front().context(); }
  int64_t position(int slot) const { return models_.at(static_cast<size_t>(slot)).position(); }
  const LanguageModel& model() const { return models_.front(); }

  void reset(int slot);  // the slot's cache empty, for a new sequence
  // Appends prompt tokens to the slot's cache; the last one's logits [vocab].
  std::vector<float> prefill(int slot, std::span<const int32_t> tokens);
  struct Next {
    int slot;
    int32_t token;
  };
  // One token for each listed slot; their logits, in the same order.
  std::vector<std::vector<float>> decode(std::span<const Next> batch);

 private:
  std::vector<LanguageModel> models_;
};

}  // namespace vkformer::server
