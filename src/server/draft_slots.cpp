// DraftSlots: a draft model proposing for the scheduler's sequences (draft_slots.hpp).
#include "draft_slots.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "vkformer/gguf.hpp"

namespace vkformer::server {

namespace {
BatchedLanguageModelOptions draft_options(const std::filesystem::path& gguf, int count, int64_t context,
                                          int64_t step_tokens, const BatchedLanguageModelOptions& cache_types) {
  BatchedLanguageModelOptions o;
  o.slots = count;
  o.step_tokens = std::max<int64_t>(step_tokens, count);
  o.cache_type_k = cache_types.cache_type_k;
  o.cache_type_v = cache_types.cache_type_v;
  o.kv_rotation = cache_types.kv_rotation;
  // The target's context where the draft's own is as long; a shorter one proposes while the
  // text fits (as generate()'s draft).
  const GgufFile file(gguf);
  const std::string arch(file.get_string_or("general.architecture", "llama"));
  const auto own = static_cast<int64_t>(file.get_uint_or(arch + ".context_length", 0));
  o.context = own > 0 ? std::min(own, context) : context;
  return o;
}
}  // namespace

DraftSlots::DraftSlots(Device& device, const std::filesystem::path& gguf, int count, int64_t context,
                       int64_t step_tokens, const BatchedLanguageModelOptions& cache_types)
    : model_(BatchedLanguageModel::load(device, gguf, draft_options(gguf, count, context, step_tokens, cache_types))),
      cached_(static_cast<size_t>(count)),
      logits_(static_cast<size_t>(count)) {
  model_.record_steps();  // as the target's: no request waits while a step's kernels compile
}

std::vector<std::vector<int32_t>> DraftSlots::propose(std::span<const Want> wants, float p_min) {
  std::vector<std::vector<int32_t>> out(wants.size());
  try {
    run(wants, p_min, out);
  } catch (const std::exception&) {
    for (size_t s = 0; s < cached_.size(); ++s) {  // what the failed step wrote is unknown
      cached_[s].clear();
      logits_[s].clear();
      try {
        model_.truncate(static_cast<int>(s), 0);
      } catch (const std::exception&) {
      }
    }
    return std::vector<std::vector<int32_t>>(wants.size());
  }
  return out;
}

void DraftSlots::run(std::span<const Want> wants, float p_min, std::vector<std::vector<int32_t>>& out) {
  const int64_t context = model_.context();
  const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
  // Each wanted slot brought to its text: cut back to the prefix it shares with it (the last
  // token run again when nothing is new and its logits are unknown), the rest run in steps.
  struct Rest {
    size_t want;
    std::span<const int32_t> tokens;
  };
  std::vector<Rest> rests;
  for (size_t i = 0; i < wants.size(); ++i) {
    const Want& w = wants[i];
    if (w.most <= 0 || w.text.empty() || static_cast<int64_t>(w.text.size()) >= context) continue;
    std::vector<int32_t>& cached = cached_[static_cast<size_t>(w.slot)];
    size_t common = static_cast<size_t>(
        std::mismatch(cached.begin(), cached.end(), w.text.begin(), w.text.end()).first - cached.begin());
    if (common == w.text.size() && common == cached.size() && !logits_[static_cast<size_t>(w.slot)].empty()) {
      rests.push_back({i, {}});
      continue;
    }
    if (common == w.text.size()) --common;
    model_.truncate(w.slot, static_cast<int64_t>(common));
    cached.resize(common);
    logits_[static_cast<size_t>(w.slot)].clear();
    rests.push_back({i, w.text.subspan(common)});
  }
  for (;;) {
    std::vector<BatchedLanguageModel::Piece> pieces;
    std::vector<Rest*> owners;
    int64_t budget = model_.step_rows();
    for (Rest& r : rests) {
      if (r.tokens.empty() || budget == 0) continue;
      const size_t n = std::min<size_t>(r.tokens.size(), static_cast<size_t>(budget));
      pieces.push_back({wants[r.want].slot, r.tokens.first(n), n == r.tokens.size()});
      owners.push_back(&r);
      budget -= static_cast<int64_t>(n);
    }
    if (pieces.empty()) break;
    const std::vector<float> rows = model_.step(pieces);
    size_t row = 0;
    for (size_t j = 0; j < pieces.size(); ++j) {
      const size_t s = static_cast<size_t>(pieces[j].slot);
      cached_[s].insert(cached_[s].end(), pieces[j].tokens.begin(), pieces[j].tokens.end());
      owners[j]->tokens = owners[j]->tokens.subspan(pieces[j].tokens.size());
      if (pieces[j].logits) {
        logits_[s].assign(rows.begin() + static_cast<std::ptrdiff_t>(row * vocab),
                          rows.begin() + static_cast<std::ptrdiff_t>((row + 1) * vocab));
        ++row;
      }
    }
  }
  // Then a token per step for every sequence still proposing.
  std::vector<size_t> active;
  for (const Rest& r : rests) active.push_back(r.want);
  while (!active.empty()) {
    std::vector<BatchedLanguageModel::Next> next;
    std::vector<size_t> going;
    for (size_t i : active) {
      const Want& w = wants[i];
      const std::vector<float>& logits = logits_[static_cast<size_t>(w.slot)];
      const auto top = std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (float l : logits) sum += std::exp(static_cast<double>(l) - *top);
      if (!std::isfinite(sum) || 1.0 / sum < p_min) continue;
      const auto token = static_cast<int32_t>(top - logits.begin());
      out[i].push_back(token);
      if (static_cast<int64_t>(out[i].size()) >= w.most || model_.position(w.slot) >= context) continue;
      next.push_back({w.slot, token});
      going.push_back(i);
    }
    if (next.empty()) break;
    const std::vector<float> rows = model_.decode(next);
    for (size_t j = 0; j < next.size(); ++j) {
      const size_t s = static_cast<size_t>(next[j].slot);
      cached_[s].push_back(next[j].token);
      logits_[s].assign(rows.begin() + static_cast<std::ptrdiff_t>(j * vocab),
                        rows.begin() + static_cast<std::ptrdiff_t>((j + 1) * vocab));
    }
    active = std::move(going);
  }
}

}  // namespace vkformer::server
