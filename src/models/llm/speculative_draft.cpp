// A draft model as a proposer (speculative.hpp), and the check that it can propose for a target.
#include <algorithm>
#include <cmath>
#include <string>

#include "llm/speculative.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer {

void check_draft_model(const LanguageModel& target, const LanguageModel& draft) {
  models::llm::check_draft_vocabulary(target.tokenizer(), target.config().vocab_size, draft.tokenizer(),
                                      draft.config().vocab_size);
}

void models::llm::check_draft_vocabulary(const GgufTokenizer& t, int64_t target_rows, const GgufTokenizer& d,
                                         int64_t draft_rows) {
  const std::string what = "draft model: its vocabulary is not the target's: ";
  if (t.vocab_size() != d.vocab_size())
    throw Error(ErrorCode::invalid_argument, what + std::to_string(d.vocab_size()) + " tokens, the target has " +
                                                 std::to_string(t.vocab_size()));
  if (draft_rows != target_rows)
    throw Error(ErrorCode::invalid_argument, what + "its output has " + std::to_string(draft_rows) +
                                                 " rows, the target's " + std::to_string(target_rows));
  for (size_t i = 0; i < t.vocab_size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (t.id_to_token(id) != d.id_to_token(id))
      throw Error(ErrorCode::invalid_argument, what + "token " + std::to_string(i) + " is '" + d.id_to_token(id) +
                                                   "' in the draft, '" + t.id_to_token(id) + "' in the target");
  }
  if (t.bos_id() != d.bos_id() || t.eos_id() != d.eos_id())
    throw Error(ErrorCode::invalid_argument, what + "BOS/EOS ids are " + std::to_string(d.bos_id()) + "/" +
                                                 std::to_string(d.eos_id()) + " in the draft, " +
                                                 std::to_string(t.bos_id()) + "/" + std::to_string(t.eos_id()) +
                                                 " in the target");
}

namespace models::llm {

bool DraftModelProposer::sync(std::span<const int32_t> context) {
  if (context.empty()) return false;
  if (draft_->position() != static_cast<int64_t>(cached_.size())) {  // another user moved the draft's cache
    draft_->reset();
    cached_.clear();
    logits_.clear();
  }
  // Keep what the draft's cache shares with the context; with nothing new, run the last token
  // again unless its logits are still at hand.
  size_t common = std::mismatch(cached_.begin(), cached_.end(), context.begin(), context.end()).first - cached_.begin();
  if (common == context.size() && !(common == cached_.size() && !logits_.empty())) --common;
  if (common == cached_.size() && common == context.size()) return true;
  draft_->rollback(draft_->position() - static_cast<int64_t>(common));
  cached_.resize(common);
  logits_.clear();
  const auto rest = context.subspan(common);
  if (static_cast<int64_t>(rest.size()) > draft_->context() - draft_->position()) {
    draft_->reset();  // the draft's cache is full: it proposes nothing from here on
    cached_.clear();
    return false;
  }
  // A few tokens (the usual catch-up: the last accepted ones) through a verification graph of
  // as many rows, keeping the last row; a prompt through the prompt chunks.
  if (static_cast<int64_t>(rest.size()) <= LanguageModel::kMaxVerifyTokens) {
    std::vector<float> rows = draft_->verify(rest);
    const size_t vocab = static_cast<size_t>(draft_->config().vocab_size);
    logits_.assign(rows.end() - static_cast<ptrdiff_t>(vocab), rows.end());
  } else {
    logits_ = draft_->append(rest);
  }
  cached_.assign(context.begin(), context.end());
  return true;
}

std::vector<int32_t> DraftModelProposer::propose(std::span<const int32_t> context, int64_t max_tokens, float p_min) {
  if (context.empty() || max_tokens <= 0 || !sync(context)) return {};
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    const auto top = std::max_element(logits_.begin(), logits_.end());
    double sum = 0;
    for (float l : logits_) sum += std::exp(static_cast<double>(l) - *top);
    if (!std::isfinite(sum) || 1.0 / sum < p_min) break;
    const auto token = static_cast<int32_t>(top - logits_.begin());
    out.push_back(token);
    if (static_cast<int64_t>(out.size()) == max_tokens || draft_->position() >= draft_->context()) break;
    logits_ = draft_->append(std::span<const int32_t>(&token, 1));
    cached_.push_back(token);
  }
  return out;
}

}  // namespace models::llm
}  // namespace vkformer
