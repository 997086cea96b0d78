#pragma once
// Text generation with a LanguageModel: a prompt, then one sampled token at a time, each
// streamed as text to a callback, and chat conversations that keep their KV cache across turns.
//
//   auto lm = vkformer::LanguageModel::load(device, "SmolLM2-135M-Instruct.Q4_1.gguf");
//   vkformer::Conversation chat(lm, vkformer::ChatTemplate::load("SmolLM2-135M-Instruct.Q4_1.gguf"));
//   chat.reply("What is the capital of France?", {.max_tokens = 64},
//              [](std::string_view text, int32_t) { std::cout << text << std::flush; return true; });
//
// Streaming: each token's bytes (GgufTokenizer::token_bytes) pass through a Utf8StreamDecoder, so
// the callback only ever sees whole UTF-8 characters; a character split over tokens arrives with
// the token that completes it (that token's call carries it, earlier ones carry ""); one that
// generation stops inside (max_tokens, the callback, a full context) is not shown at all, and
// one the model ends generation inside is shown as U+FFFD (its bytes are no UTF-8). The token
// that ends generation (GgufTokenizer::is_end_of_generation) is neither shown nor kept.
//
// Every generated token except that last one is run through the model before generate()
// returns, so the cache holds the prompt and the whole reply and a conversation continues from
// there by appending only the next turn's tokens.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/chat.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer {

class LanguageModel;

// Speculative decoding (llama.cpp's --draft-max, --draft-min, --draft-p-min): a proposer guesses
// the next few tokens, the model scores the token it just chose and the guesses in one batched
// pass (LanguageModel::verify) and keeps the guesses its sampler agrees with, rolling the rest
// back. Greedy output is exactly plain decoding's; with temperature the standard speculative
// sampling rule (accept a guess with probability min(1, p/q), else draw from the normalized
// residual max(0, p - q)) keeps the sampler's distribution. Proposers:
//   ngram  prompt lookup: the longest recent n-gram (2 to 4 tokens) that occurred before in the
//          prompt or the reply proposes the tokens that followed it; no model
//   draft  a draft model of the same vocabulary, run greedily on its own KV cache, stopping where
//          its top token's probability is below draft_p_min
// Adaptive: each pass verifies as many of the proposals as promise the most tokens per second,
// from the acceptance seen so far and the measured time of each pass size (on a CPU device every
// row costs; on a GPU hardly), so that speculation costs little where it does not help.
enum class SpeculativeMode : uint8_t { off, ngram, draft };
const char* to_string(SpeculativeMode mode);

struct SpeculativeOptions {
  SpeculativeMode mode = SpeculativeMode::off;
  LanguageModel* draft_model = nullptr;  // mode draft: check_draft_model(target, draft) passed
  int32_t draft_max = 16;     // 1..LanguageModel::kMaxVerifyTokens - 1: proposals per pass at most
  int32_t draft_min = 0;      // 0..draft_max: fewer proposals than this are not verified
  float draft_p_min = 0.8f;   // [0, 1]: a draft model stops where its top probability is lower
  // false: every proposal (up to draft_max) is verified, whatever it costs (tests, measurements).
  bool adaptive = true;
};

// Throws invalid_argument naming the option, its range and the value unless every option is in
// range and mode draft has a draft_model.
void validate(const SpeculativeOptions& options);
// Throws invalid_argument unless `draft` can propose for `target`: the same vocabulary (size,
// every token's text, BOS and EOS), naming the first difference.
void check_draft_model(const LanguageModel& target, const LanguageModel& draft);

struct TextGenerationOptions {
  int64_t max_tokens = 128;  // > 0: tokens to generate at most
  SamplingOptions sampling;  // greedy by default
  SpeculativeOptions speculative;  // off by default
};

enum class StopReason : uint8_t {
  end_of_generation,  // the model produced an end-of-generation token (eos, <|im_end|>, ...)
  max_tokens,         // max_tokens were generated
  callback,           // the callback returned false
  context_full,       // the KV cache has no room for another token
};
const char* to_string(StopReason reason);

struct TextGenerationStats {
  int64_t prompt_tokens = 0;     // tokens appended before the first one was sampled
  double prompt_seconds = 0;     // their batched passes
  int64_t generated_tokens = 0;  // tokens returned (the end-of-generation token not counted)
  double generation_seconds = 0; // sampling and the one-token passes that ran them
  StopReason stop = StopReason::max_tokens;
  // Speculative decoding: tokens proposed and verified, those kept, and the model's passes after
  // the prompt (verification passes and plain one-token ones): generated_tokens / passes is the
  // tokens per step.
  int64_t drafted_tokens = 0, accepted_tokens = 0, passes = 0;
  double acceptance_rate() const;  // accepted / drafted (0 when none was drafted)
  double prompt_tokens_per_second() const;
  double generation_tokens_per_second() const;
};

struct TextGenerationResult {
  std::vector<int32_t> tokens;  // generated, the end-of-generation token not included
  std::string text;             // what the callback was given, all together
  TextGenerationStats stats;
};

// Called once per generated token (not for the token that ends generation) with the text it
// completes, possibly "". Return false to stop after it.
using TokenCallback = std::function<bool(std::string_view text, int32_t token)>;

// Appends `prompt` (at least one token) to the model's cache at its current position, then
// samples up to max_tokens tokens. The sampler is given the prompt with accept(), so its
// repetition penalty sees it. A prompt that does not fit in the cache is invalid_argument naming
// both numbers; an empty prompt or max_tokens <= 0 is invalid_argument. Bytes of an unfinished
// UTF-8 character left at the end reach the callback as U+FFFD in a last call with token -1.
TextGenerationResult generate(LanguageModel& model, std::span<const int32_t> prompt,
                              const TextGenerationOptions& options, const TokenCallback& on_token = {});
// The same with a caller's sampler (its history and random sequence carry on).
TextGenerationResult generate(LanguageModel& model, std::span<const int32_t> prompt, Sampler& sampler,
                              int64_t max_tokens, const TokenCallback& on_token = {},
                              const SpeculativeOptions& speculative = {});

namespace models::llm {
class DraftModelProposer;
}

// A chat with a model: its template (ChatTemplate::load on the model's GGUF), the messages so
// far, and the model's cache holding exactly the text of the conversation. Each reply() appends
// only the new turn's tokens. A Conversation uses the model's cache alone: it empties it when
// created, and starts again from the messages if something else moved it.
class Conversation {
 public:
  Conversation(LanguageModel& model, ChatTemplate chat_template,
               std::optional<std::string> system_prompt = std::nullopt);

  // Adds the user's message, generates the assistant's reply (streamed to on_token) and adds it.
  // The sampler (options.sampling at the first reply) carries on across replies.
  TextGenerationResult reply(std::string_view user_text, const TextGenerationOptions& options = {},
                             const TokenCallback& on_token = {});

  // The system prompt if given, then user and assistant turns; a reply is kept as its tokens'
  // bytes (GgufTokenizer::decode), which are what the cache holds.
  const std::vector<ChatMessage>& messages() const { return messages_; }
  const ChatTemplate& chat_template() const { return template_; }
  // Tokens the last reply() appended before generating (its turn's text, not the whole chat).
  int64_t last_turn_tokens() const { return last_turn_tokens_; }
  // Forgets the messages (keeps the system prompt) and empties the model's cache.
  void reset();
  // Forgets the oldest user turn and the reply to it (the system prompt stays), to make room in
  // a full context. Where the cache holds that turn's tokens at known places (the system
  // prompt's end and the turn's end tokenize apart from their neighbours), they leave the cache
  // by LanguageModel::shift, and the next reply() runs only its own turn, as before; otherwise
  // the next reply() runs the conversation again from its messages. False when there is no turn
  // left to forget.
  bool forget_oldest_turn();
  // Whether the last forget_oldest_turn() shifted the cache (true) or left the conversation to
  // run again (false).
  bool last_forget_shifted() const { return last_forget_shifted_; }

 private:
  LanguageModel* model_;
  ChatTemplate template_;
  std::vector<ChatMessage> messages_;
  size_t first_turn_ = 0;        // messages_[0] is the system prompt when one was given
  std::string cached_text_;      // the text whose tokens are in the model's cache
  int64_t cached_position_ = 0;  // the model's position() after them
  // Those tokens (empty where unknown): speculative decoding's proposers look at the whole
  // conversation, and a draft model's cache (drafter_) carries over from turn to turn.
  std::vector<int32_t> cached_ids_;
  std::shared_ptr<models::llm::DraftModelProposer> drafter_;
  std::optional<Sampler> sampler_;
  int64_t last_turn_tokens_ = 0;
  // Places where the cache's rows [0, position) hold exactly cached_text_[0, text): the end of
  // the system prompt, then the end of each turn (its reply's closing text included).
  struct Anchor {
    size_t text;
    int64_t position;
  };
  std::vector<Anchor> anchors_;
  size_t turn_end_text_ = 0;  // where the last reply's turn ends in the template's text (0: unknown)
  bool last_forget_shifted_ = false;
};

}  // namespace vkformer
