// SequenceSlots: the scheduler's view of one BatchedLanguageModel (sequence_slots.hpp).
#include "sequence_slots.hpp"

namespace vkformer::server {

namespace {
BatchedLanguageModelOptions options(int count, int64_t context) {
  BatchedLanguageModelOptions o;
  o.slots = count;
  o.context = context;
  return o;
}
}  // namespace

SequenceSlots::SequenceSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context)
    : model_(BatchedLanguageModel::load(device, gguf, options(count, context))) {
  // Every bucket's step recorded now, at start-up, so that no request waits while a larger
  // batch's kernels are compiled (seconds on a CPU device) the first time it forms.
  for (int n = 1;; n = model_.decode_rows(n) + 1) {
    model_.decode_step_stats(n);
    if (model_.decode_rows(n) >= count) break;
  }
}

std::vector<std::vector<float>> SequenceSlots::decode(std::span<const Next> batch) {
  const std::vector<float> all = model_.decode(batch);
  const size_t vocab = all.size() / batch.size();
  std::vector<std::vector<float>> logits;
  logits.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    logits.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                        all.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
  return logits;
}

}  // namespace vkformer::server
