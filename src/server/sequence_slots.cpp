// SequenceSlots: one LanguageModel per slot (sequence_slots.hpp says why and what comes next).
#include "sequence_slots.hpp"

namespace vkformer::server {

SequenceSlots::SequenceSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context) {
  LanguageModelOptions o;
  o.context = context;
  models_.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) models_.push_back(LanguageModel::load(device, gguf, o));
}

void SequenceSlots::reset(int slot) { models_.at(static_cast<size_t>(slot)).reset(); }

std::vector<float> SequenceSlots::prefill(int slot, std::span<const int32_t> tokens) {
  return models_.at(static_cast<size_t>(slot)).append(tokens);
}

std::vector<std::vector<float>> SequenceSlots::decode(std::span<const Next> batch) {
  std::vector<std::vector<float>> logits;
  logits.reserve(batch.size());
  for (const Next& n : batch) logits.push_back(models_.at(static_cast<size_t>(n.slot)).append({&n.token, 1}));
  return logits;
}

}  // namespace vkformer::server
