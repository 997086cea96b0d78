// The generation loop and chat conversations of vkformer/generate.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "llm/speculative.hpp"

#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Logits with a NaN or an infinity sample garbage (NaN compares false with everything) that
// streams as text with success: an error instead, naming where the position was.
[[noreturn]] void refuse_non_finite(int64_t position, size_t token, float value) {
  throw Error(ErrorCode::unsupported,
              "generate: the logits after position " + std::to_string(position) + " hold " +
                  (std::isnan(value) ? "NaN" : "an infinity") + " (token " + std::to_string(token) +
                  "): the model's weights hold NaN or infinities, or its arithmetic overflowed "
                  "(with f16 activations, try f32)");
}

void check_logits(std::span<const float> logits, int64_t position) {
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i])) refuse_non_finite(position, i, logits[i]);
}

// Appends `token` and returns the device's greedy choice after it (LanguageModel::append_greedy),
// refused as check_logits refuses the logits it was made from (the position after the token).
int32_t append_greedy_checked(LanguageModel& model, int32_t token) {
  const GreedyToken t = model.append_greedy(std::span<const int32_t>(&token, 1));
  if (t.non_finite >= 0) refuse_non_finite(model.position(), static_cast<size_t>(t.non_finite), t.non_finite_value);
  return t.token;
}

// Greedy without a repetition penalty needs nothing of the logits but their argmax, which the
// device finds (LanguageModel::append_greedy): a decoded token then reads back 16 bytes, not
// the vocabulary. Speculative passes keep every row's logits.
bool greedy_on_device(const Sampler& sampler, const SpeculativeOptions& spec) {
  return spec.mode == SpeculativeMode::off && sampler.options().temperature == 0.0f &&
         sampler.options().repeat_penalty == 1.0f;
}

}  // namespace

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::end_of_generation: return "end of generation";
    case StopReason::max_tokens: return "max tokens";
    case StopReason::callback: return "stopped by the callback";
    case StopReason::context_full: return "context full";
  }
  return "unknown";
}

double TextGenerationStats::prompt_tokens_per_second() const {
  return prompt_seconds > 0 ? static_cast<double>(prompt_tokens) / prompt_seconds : 0.0;
}

double TextGenerationStats::generation_tokens_per_second() const {
  return generation_seconds > 0 ? static_cast<double>(generated_tokens) / generation_seconds : 0.0;
}

const char* to_string(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::off: return "off";
    case SpeculativeMode::ngram: return "ngram";
    case SpeculativeMode::draft: return "draft";
  }
  return "unknown";
}

double TextGenerationStats::acceptance_rate() const {
  return drafted_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(drafted_tokens) : 0.0;
}

void validate(const SpeculativeOptions& o) {
  const int64_t most = LanguageModel::kMaxVerifyTokens - 1;
  if (o.draft_max < 1 || o.draft_max > most)
    throw Error(ErrorCode::invalid_argument, "speculative: draft_max must be in 1.." + std::to_string(most) +
                                                 " (tokens verified in one pass), got " + std::to_string(o.draft_max));
  if (o.draft_min < 0 || o.draft_min > o.draft_max)
    throw Error(ErrorCode::invalid_argument, "speculative: draft_min must be in 0..draft_max (" +
                                                 std::to_string(o.draft_max) + "), got " + std::to_string(o.draft_min));
  if (!(o.draft_p_min >= 0.0f && o.draft_p_min <= 1.0f))
    throw Error(ErrorCode::invalid_argument,
                "speculative: draft_p_min must be in [0, 1], got " + std::to_string(o.draft_p_min));
  if (o.mode == SpeculativeMode::draft && !o.draft_model)
    throw Error(ErrorCode::invalid_argument, "speculative: mode draft needs a draft_model");
}

namespace {

// Shows, keeps and counts the generated tokens for generate(): the sampler's history, the text
// through the UTF-8 decoder, the callback.
struct Emitter {
  const GgufTokenizer& tokenizer;
  Sampler& sampler;
  const TokenCallback& on_token;
  TextGenerationResult& r;
  Utf8StreamDecoder utf8;
  // False when the callback asked to stop after `token`.
  bool emit(int32_t token) {
    sampler.accept(token);
    r.tokens.push_back(token);
    // Control tokens other than the end are not shown, as llama.cpp's tools do by default.
    const std::string piece = tokenizer.is_control(token) ? std::string() : utf8.push(tokenizer.token_bytes(token));
    r.text += piece;
    return !on_token || on_token(piece, token);
  }
};


}  // namespace

TextGenerationResult generate(LanguageModel& model, std::span<const int32_t> prompt, Sampler& sampler,
                              int64_t max_tokens, const TokenCallback& on_token, const SpeculativeOptions& spec) {
  return models::llm::generate_continued(model, {}, prompt, sampler, max_tokens, on_token, spec, nullptr);
}

TextGenerationResult models::llm::generate_continued(LanguageModel& model, std::span<const int32_t> history,
                                                     std::span<const int32_t> prompt, Sampler& sampler,
                                                     int64_t max_tokens, const TokenCallback& on_token,
                                                     const SpeculativeOptions& spec, DraftModelProposer* kept) {
  if (max_tokens <= 0)
    throw Error(ErrorCode::invalid_argument, "generate: max_tokens must be > 0, got " + std::to_string(max_tokens));
  if (prompt.empty()) throw Error(ErrorCode::invalid_argument, "generate: the prompt has no tokens");
  validate(spec);
  if (spec.mode == SpeculativeMode::draft) check_draft_model(model, *spec.draft_model);
  const GgufTokenizer& tokenizer = model.tokenizer();
  TextGenerationResult r;

  const auto t0 = Clock::now();
  // rows: the logits after the cache's last token and after each proposal in it ([k+1 × vocab]).
  std::vector<float> rows = model.append(prompt);
  check_logits(rows, model.position());
  // The proposers look at the whole text: what the cache held, the prompt and the reply so far.
  std::vector<int32_t> context;
  if (spec.mode != SpeculativeMode::off) {
    context.assign(history.begin(), history.end());
    context.insert(context.end(), prompt.begin(), prompt.end());
  }
  std::optional<models::llm::DraftModelProposer> own;
  models::llm::DraftModelProposer* drafter = kept;
  if (spec.mode == SpeculativeMode::draft) {
    if (!drafter || drafter->model() != spec.draft_model) drafter = &own.emplace(*spec.draft_model);
    drafter->sync(context);  // the draft's prompt pass, as the target's, before generation
  }
  r.stats.prompt_seconds = seconds_since(t0);
  r.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  sampler.accept(prompt);

  models::llm::DraftBudget budget(spec.draft_max);
  std::mt19937_64 rng(sampler.options().seed ^ 0x5bd1e995u);  // the acceptance draws, apart from the sampler's

  Emitter out{tokenizer, sampler, on_token, r, {}};
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> drafts;  // in the cache after the token before rows' first
  const bool device_greedy = greedy_on_device(sampler, spec);
  std::optional<int32_t> chosen;  // device_greedy after the first token: rows' choice, rows left empty
  double pass_seconds = 0;      // the last verification pass's
  const auto g0 = Clock::now();
  for (bool done = false; !done;) {
    // Each row chooses a token; the drafts up to the first it does not keep stay in the cache.
    int32_t next = -1;  // chosen and shown, not in the cache yet
    const int64_t k = static_cast<int64_t>(drafts.size()), accepted_before = r.stats.accepted_tokens;
    for (int64_t i = 0; i <= k; ++i) {
      // Every returned token is run, so there must be room for it before it is chosen (rows of
      // kept drafts have it: their pass fitted).
      if (i == k && model.position() >= model.context()) {
        r.stats.stop = StopReason::context_full;
        done = true;
        break;
      }
      const models::llm::Verdict v =
          chosen ? models::llm::Verdict{*chosen, false}
                 : models::llm::choose_after_proposal(sampler,
                          std::span<const float>(rows).subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab)),
                          i < k ? drafts[static_cast<size_t>(i)] : -1, rng);
      if (!v.accepted) model.rollback(k - i);  // the drafts from i on
      if (tokenizer.is_end_of_generation(v.token)) {
        if (v.accepted) model.rollback(k - i);  // the end itself is not kept
        r.stats.stop = StopReason::end_of_generation;
        done = true;
        break;
      }
      r.stats.accepted_tokens += v.accepted ? 1 : 0;
      const bool go_on = out.emit(v.token);
      if (spec.mode != SpeculativeMode::off) context.push_back(v.token);
      const bool full = static_cast<int64_t>(r.tokens.size()) >= max_tokens;
      if (!go_on || full) {
        r.stats.stop = go_on ? StopReason::max_tokens : StopReason::callback;
        if (v.accepted) {
          model.rollback(k - i - 1);
        } else if (device_greedy) {
          append_greedy_checked(model, v.token);
        } else {
          const std::vector<float> last = model.append(std::span<const int32_t>(&v.token, 1));
          check_logits(last, model.position());
        }
        done = true;
        break;
      }
      if (!v.accepted) {
        next = v.token;
        break;
      }
    }
    if (done) break;
    if (k > 0) budget.on_verified(k, r.stats.accepted_tokens - accepted_before, pass_seconds);
    // Propose what follows `next` (as many as the context, the token budget and the adaptive
    // limit allow) and run `next` with them in one pass, or alone.
    const int64_t room = std::min(model.context() - model.position() - 1,
                                  max_tokens - static_cast<int64_t>(r.tokens.size()) - 1);
    const int64_t want = std::min<int64_t>(spec.draft_max, room);
    // Prompt lookup's proposals cost nothing: looked up first, then as many verified as pay. A
    // draft model's cost: as many asked for as would pay, its time counted in the pass's.
    const auto pass_start = Clock::now();
    drafts.clear();
    if (want > 0 && spec.mode == SpeculativeMode::ngram) {
      drafts = models::llm::propose_ngram(context, want);
      if (spec.adaptive) drafts.resize(static_cast<size_t>(budget.choose(static_cast<int64_t>(drafts.size()))));
    }
    if (want > 0 && spec.mode == SpeculativeMode::draft)
      if (const int64_t k = spec.adaptive ? budget.choose(want) : want; k > 0)
        drafts = drafter->propose(context, k, spec.draft_p_min);
    if (static_cast<int64_t>(drafts.size()) < std::max<int32_t>(spec.draft_min, 1)) drafts.clear();
    ++r.stats.passes;
    if (drafts.empty()) {
      if (device_greedy)
        chosen = append_greedy_checked(model, next);
      else
        rows = model.append(std::span<const int32_t>(&next, 1));
      budget.on_plain_step(seconds_since(pass_start));
    } else {
      std::vector<int32_t> batch{next};
      batch.insert(batch.end(), drafts.begin(), drafts.end());
      rows = model.verify(batch);
      pass_seconds = seconds_since(pass_start);
      r.stats.drafted_tokens += static_cast<int64_t>(drafts.size());
    }
    if (!chosen) check_logits(rows, model.position());
  }
  r.stats.generation_seconds = seconds_since(g0);
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  // Cut off inside a character (max tokens, the callback, a full context): nothing of it is
  // shown. A model that ends generation there produced bytes that are no UTF-8: U+FFFD.
  if (r.stats.stop != StopReason::end_of_generation) {
    out.utf8.discard();
  } else if (const std::string rest = out.utf8.flush(); !rest.empty()) {
    r.text += rest;
    if (on_token) on_token(rest, -1);
  }
  return r;
}

TextGenerationResult generate(LanguageModel& model, std::span<const int32_t> prompt,
                              const TextGenerationOptions& options, const TokenCallback& on_token) {
  Sampler sampler(options.sampling);
  return generate(model, prompt, sampler, options.max_tokens, on_token, options.speculative);
}

// ------------------------------------------------------------------------------- Conversation

Conversation::Conversation(LanguageModel& model, ChatTemplate chat_template,
                           std::optional<std::string> system_prompt)
    : model_(&model), template_(std::move(chat_template)) {
  if (system_prompt) {
    messages_.push_back({"system", std::move(*system_prompt)});
    first_turn_ = 1;
  }
  model_->reset();
}

void Conversation::reset() {
  messages_.resize(first_turn_);
  anchors_.clear();
  turn_end_text_ = 0;
  cached_text_.clear();
  cached_ids_.clear();
  cached_position_ = 0;
  sampler_.reset();
  last_turn_tokens_ = 0;
  model_->reset();
}

bool Conversation::forget_oldest_turn() {
  if (messages_.size() <= first_turn_) return false;
  auto first = messages_.begin() + static_cast<ptrdiff_t>(first_turn_), last = first + 1;
  if (last != messages_.end() && last->role == "assistant") ++last;
  const bool whole_turn = last - first == 2;
  messages_.erase(first, last);
  last_forget_shifted_ = false;
  // The turn's rows lie between the first two anchors: shift them out of the cache, and its text
  // out of cached_text_ (the next reply() checks that the rest still starts the conversation's
  // text, as for any turn).
  if (whole_turn && anchors_.size() >= 2 && !cached_text_.empty() && model_->position() == cached_position_) {
    const Anchor a = anchors_[0], b = anchors_[1];
    const int64_t drop = b.position - a.position;
    if (drop > 0 && b.text > a.text && b.text <= cached_text_.size()) {
      model_->shift(a.position, drop);
      cached_text_.erase(a.text, b.text - a.text);
      if (cached_ids_.size() == static_cast<size_t>(cached_position_))
        cached_ids_.erase(cached_ids_.begin() + a.position, cached_ids_.begin() + b.position);
      else
        cached_ids_.clear();
      cached_position_ -= drop;
      anchors_.erase(anchors_.begin() + 1);
      for (size_t i = 1; i < anchors_.size(); ++i) {
        anchors_[i].text -= b.text - a.text;
        anchors_[i].position -= drop;
      }
      if (turn_end_text_ > 0) turn_end_text_ -= b.text - a.text;
      last_forget_shifted_ = true;
      return true;
    }
  }
  cached_text_.clear();  // the cache no longer holds a prefix of the conversation's text
  cached_ids_.clear();
  anchors_.clear();
  return true;
}

TextGenerationResult Conversation::reply(std::string_view user_text, const TextGenerationOptions& options,
                                         const TokenCallback& on_token) {
  if (!sampler_) sampler_.emplace(options.sampling);
  messages_.push_back({"user", std::string(user_text)});
  try {
    const std::string full = template_.apply(messages_, true);
    // Only the new turn's text when the cache holds what this conversation put there; otherwise
    // (someone else used the model, or the text does not continue) the whole conversation again.
    const bool continues = !cached_text_.empty() && model_->position() == cached_position_ &&
                           full.compare(0, cached_text_.size(), cached_text_) == 0;
    std::vector<int32_t> ids;
    const GgufTokenizer& tok = model_->tokenizer();
    // Whether `part` tokenizes alone as the first tokens of `ids` (then its end is an anchor).
    auto starts_ids = [&](std::string_view part, bool bos) {
      const std::vector<int32_t> p = tok.encode(part, bos, true);
      return p.size() <= ids.size() && std::equal(p.begin(), p.end(), ids.begin()) ? static_cast<int64_t>(p.size()) : -1;
    };
    if (continues) {
      ids = tok.encode(std::string_view(full).substr(cached_text_.size()), false, true);
      // The end of the last turn: its reply's closing text, the first part of this one's.
      if (turn_end_text_ > cached_text_.size() && turn_end_text_ <= full.size()) {
        const int64_t n = starts_ids(std::string_view(full).substr(cached_text_.size(), turn_end_text_ - cached_text_.size()), false);
        if (n > 0) anchors_.push_back({turn_end_text_, cached_position_ + n});
      }
    } else {
      model_->reset();
      cached_text_.clear();
      cached_ids_.clear();
      anchors_.clear();
      // A template that writes the BOS token itself gets no second one.
      ids = tok.encode(full, !template_.writes_bos(), true);
      // The end of the system prompt (or of the BOS token): what a shift keeps.
      // (Without one, what the template writes before the first turn: a default system prompt.)
      std::string head;
      try {
        head = template_.apply(std::span<const ChatMessage>(messages_.data(), first_turn_), false);
      } catch (const Error&) {
        head.clear();  // a template that wants messages: only the BOS token is kept
      }
      if (full.starts_with(head)) {
        const int64_t n = starts_ids(head, !template_.writes_bos());
        if (n >= 0) anchors_.push_back({head.size(), n});
      }
    }
    last_turn_tokens_ = static_cast<int64_t>(ids.size());
    // The conversation's tokens so far, where known, for the proposers; the draft proposer kept
    // from the last turn (its cache holds the conversation: only the new tokens run).
    const bool known = continues && cached_ids_.size() == static_cast<size_t>(cached_position_);
    if (!known) cached_ids_.clear();
    const SpeculativeOptions& spec = options.speculative;
    if (spec.mode == SpeculativeMode::draft && spec.draft_model &&
        (!drafter_ || drafter_->model() != spec.draft_model))
      drafter_ = std::make_shared<models::llm::DraftModelProposer>(*spec.draft_model);
    auto r = models::llm::generate_continued(*model_, cached_ids_, ids, *sampler_, options.max_tokens, on_token,
                                             spec, spec.mode == SpeculativeMode::draft ? drafter_.get() : nullptr);
    cached_ids_.insert(cached_ids_.end(), ids.begin(), ids.end());
    cached_ids_.insert(cached_ids_.end(), r.tokens.begin(), r.tokens.end());
    // The reply as the tokens' bytes (r.text may have U+FFFD for bytes that are no UTF-8 and
    // lacks control tokens): then the next turn's text continues the cache's exactly.
    std::string reply = model_->tokenizer().decode(r.tokens);
    cached_text_ = full + reply;
    cached_position_ = model_->position();
    if (cached_ids_.size() != static_cast<size_t>(cached_position_)) cached_ids_.clear();  // not expected
    messages_.push_back({"assistant", std::move(reply)});
    // Where this turn ends in the template's text (the reply's closing text included), if the
    // text so far starts it: the next reply() finds that place in its tokens.
    const std::string closed = template_.apply(messages_, false);
    turn_end_text_ = closed.starts_with(cached_text_) ? closed.size() : 0;
    return r;
  } catch (...) {
    // The turn did not happen: the next reply starts again from the messages.
    messages_.pop_back();
    cached_text_.clear();
    cached_ids_.clear();
    throw;
  }
}

}  // namespace vkformer
