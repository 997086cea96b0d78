// SequenceSlots: the scheduler's view of one BatchedLanguageModel (sequence_slots.hpp).
#include "sequence_slots.hpp"

#include <algorithm>
#include <string>

#include "llm/speculative.hpp"
#include "vkformer/error.hpp"

namespace vkformer::server {

namespace {
BatchedLanguageModelOptions options(int count, int64_t context, int64_t step_tokens, std::optional<DType> cache_type_k,
                                    std::optional<DType> cache_type_v, bool kv_rotation, int64_t draft_max) {
  BatchedLanguageModelOptions o;
  o.kv_rotation = kv_rotation;
  o.slots = count;
  o.context = context;
  o.cache_type_k = cache_type_k;
  o.cache_type_v = cache_type_v;
  o.step_tokens = std::max<int64_t>(step_tokens, count);
  if (draft_max > 0) o.logit_rows = std::min(o.step_tokens, count * (1 + draft_max));
  return o;
}
}  // namespace

SequenceSlots::SequenceSlots(Device device, const std::filesystem::path& gguf, int count, int64_t context,
                             int64_t step_tokens, std::optional<DType> cache_type_k, std::optional<DType> cache_type_v,
                             bool kv_rotation, bool context_shift, int64_t draft_max,
                             const std::filesystem::path& draft)
    : device_(std::move(device)),
      model_(BatchedLanguageModel::load(device_, gguf,
                                        options(count, context, step_tokens, cache_type_k, cache_type_v, kv_rotation,
                                                draft_max))) {
  // Every bucket's step recorded now, at start-up, so that no request waits while a larger
  // step's kernels are compiled (seconds on a CPU device) the first time it forms.
  model_.record_steps();
  if (context_shift) model_.record_shift();
  if (!draft.empty()) {
    try {
      BatchedLanguageModelOptions types;
      types.cache_type_k = cache_type_k;
      types.cache_type_v = cache_type_v;
      types.kv_rotation = kv_rotation;
      draft_ = std::make_unique<DraftSlots>(device_, draft, count, model_.context(), model_.step_rows(), types);
      models::llm::check_draft_vocabulary(model_.tokenizer(), model_.config().vocab_size,
                                          draft_->model().tokenizer(), draft_->model().config().vocab_size);
    } catch (const Error& e) {
      const std::string m = e.what(), path = draft.string();
      throw Error(e.code(), m.starts_with(path) ? "--model-draft " + m : "--model-draft " + path + ": " + m);
    }
  }
}

std::vector<std::vector<float>> SequenceSlots::step(std::span<const Piece> pieces) {
  const std::vector<float> all = model_.step(pieces);
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  std::vector<std::vector<float>> logits;
  logits.reserve(all.size() / vocab);
  for (size_t i = 0; i + vocab <= all.size(); i += vocab)
    logits.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i),
                        all.begin() + static_cast<std::ptrdiff_t>(i + vocab));
  return logits;
}

}  // namespace vkformer::server
