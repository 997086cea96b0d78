// Text generation (vkformer/generate.hpp) on llama GGUF files:
//   - the tiny random-weight llama (tests/golden_llama/tiny): greedy generation against the
//     argmax of the same sequence's logits computed in one batched pass (the loop's one-token
//     passes against the prompt graph), its first token against the float64 reference's argmax,
//     every stop reason, streaming, seeds, and conversations that append only the new turn;
//   - SmolLM2-135M-Instruct Q4_1 ($VKFORMER_SMOLLM2_GGUF, or scripts/fetch_smollm2.sh): greedy
//     generate() from the golden prompts equals tests/golden_llama's float64 continuations,
//     stopping at the same end-of-generation token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_device.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kGolden = VKF_LLAMA_GOLDEN_DIR;

const json& tiny_golden() {
  static const json g = json::parse(std::ifstream(kGolden / "tiny" / "golden.json"));
  return g;
}
fs::path tiny(const char* which) { return kGolden / "tiny" / ("tiny_llama_" + std::string(which) + ".gguf"); }
std::vector<int32_t> tiny_ids(const char* model, const char* seq) {
  return tiny_golden()["models"][model]["sequences"][seq]["ids"].get<std::vector<int32_t>>();
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

class Generate : public DeviceTest {};

// The untied tiny model in a conversation under the system prompt "Be brief.", replies of at most
// 6 tokens: the conversation tests' set-up.
struct BriefChat {
  LanguageModel lm;
  const ChatTemplate t;
  Conversation chat;
  const TextGenerationOptions o{.max_tokens = 6};
  explicit BriefChat(Device& dev)
      : lm(LanguageModel::load(dev, tiny("untied"))), t(ChatTemplate::load(tiny("untied"))), chat(lm, t, "Be brief.") {}
};

// Greedy tokens from the loop (prompt pass, then one-token passes) against the argmax of every
// row of the whole sequence run in one batched pass. A different argmax is allowed only where
// the batched pass has a near tie (within 1e-4 of max|logit|: f32 summation order).
TEST_F(Generate, GreedyTokensAreTheArgmaxOfTheWholeSequence) {
  for (const char* model : {"untied", "tied"}) {
    LanguageModel lm = LanguageModel::load(device(), tiny(model));
    const int64_t vocab = lm.config().vocab_size;
    const std::vector<int32_t> prompt = tiny_ids(model, "hello");
    std::vector<std::string> pieces;
    auto r = generate(lm, prompt, {.max_tokens = 40}, [&](std::string_view text, int32_t) {
      pieces.emplace_back(text);
      return true;
    });
    ASSERT_FALSE(r.tokens.empty()) << model;
    EXPECT_EQ(lm.position(), static_cast<int64_t>(prompt.size() + r.tokens.size())) << model;
    EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(r.stats.generated_tokens, static_cast<int64_t>(r.tokens.size()));
    // The first token: the float64 reference's argmax after the prompt (margins 14.4 and 0.014:
    // the untied one is a near tie, so only the tied model's is asserted).
    const auto& seq = tiny_golden()["models"][model]["sequences"]["hello"];
    if (seq["top2_margin"].back().get<double>() > 0.1) EXPECT_EQ(r.tokens[0], seq["argmax"].back().get<int32_t>());

    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
    lm.reset();
    const std::vector<float> logits = lm.append_all_logits(all);
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      const float* row = logits.data() + (prompt.size() - 1 + i) * vocab;
      const int32_t top = argmax(row, vocab);
      float scale = 0;
      for (int64_t v = 0; v < vocab; ++v) scale = std::max(scale, std::abs(row[v]));
      if (top != r.tokens[i])
        EXPECT_LE(row[top] - row[r.tokens[i]], 1e-4 * scale) << model << ": token " << i;
    }
    // Not at an end-of-generation token: it would have stopped.
    for (int32_t t : r.tokens) EXPECT_FALSE(lm.tokenizer().is_end_of_generation(t));
    if (r.stats.stop == StopReason::max_tokens) EXPECT_EQ(r.tokens.size(), 40u);
    // Streaming: the pieces are the text, and the text is the tokens' bytes.
    std::string joined;
    for (const auto& p : pieces) joined += p;
    EXPECT_EQ(joined, r.text);
    EXPECT_EQ(pieces.size(), r.tokens.size() + (pieces.size() > r.tokens.size() ? 1 : 0));
    std::string bytes;
    for (int32_t t : r.tokens)
      if (!lm.tokenizer().is_control(t)) bytes += lm.tokenizer().token_bytes(t);
    Utf8StreamDecoder d;
    EXPECT_EQ(r.text, d.push(bytes) + d.flush());
  }
}

// A generation cut off by max_tokens inside a multi-byte character shows nothing of that
// character: its text and its streamed pieces are the complete characters only (no U+FFFD).
// The tiny model's vocabulary is mostly single bytes, so hot seeded sampling soon stops inside
// one; the seed and length where it does are found first, then generated again.
TEST_F(Generate, StoppingInsideACharacterShowsNothingOfIt) {
  LanguageModel lm = LanguageModel::load(device(), tiny("untied"));
  const std::vector<int32_t> prompt = tiny_ids("untied", "hello");
  const GgufTokenizer& tok = lm.tokenizer();
  TextGenerationOptions options{.max_tokens = 24, .sampling = {.temperature = 3.0f}};
  size_t cut = 0;
  std::vector<int32_t> tokens;
  for (uint64_t seed = 1; seed <= 20 && cut == 0; ++seed) {
    options.sampling.seed = seed;
    lm.reset();
    tokens = generate(lm, prompt, options).tokens;
    Utf8StreamDecoder d;
    for (size_t k = 0; k < tokens.size() && cut == 0; ++k) {
      if (!tok.is_control(tokens[k])) d.push(tok.token_bytes(tokens[k]));
      if (d.holds_back()) cut = k + 1;
    }
  }
  ASSERT_GT(cut, 0u) << "no seed in 1..20 stopped inside a character";
  options.max_tokens = static_cast<int64_t>(cut);
  lm.reset();
  std::string streamed;
  const auto r = generate(lm, prompt, options, [&](std::string_view piece, int32_t) {
    streamed += piece;
    return true;
  });
  ASSERT_EQ(r.tokens, std::vector<int32_t>(tokens.begin(), tokens.begin() + cut));
  EXPECT_EQ(r.stats.stop, StopReason::max_tokens);
  Utf8StreamDecoder complete;
  std::string want;
  for (int32_t t : r.tokens)
    if (!tok.is_control(t)) want += complete.push(tok.token_bytes(t));
  EXPECT_TRUE(complete.holds_back());
  EXPECT_EQ(r.text, want);
  EXPECT_EQ(streamed, want);
}

TEST_F(Generate, StopsAtEachReason) {
  LanguageModel lm = LanguageModel::load(device(), tiny("untied"), {.context = 40});
  const std::vector<int32_t> prompt = tiny_ids("untied", "chat");  // 24 tokens
  // max_tokens.
  auto r = generate(lm, prompt, {.max_tokens = 5});
  EXPECT_EQ(r.stats.stop, StopReason::max_tokens);
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(lm.position(), 29);
  // The callback.
  lm.reset();
  int calls = 0;
  r = generate(lm, prompt, {.max_tokens = 10}, [&](std::string_view, int32_t) { return ++calls < 3; });
  EXPECT_EQ(r.stats.stop, StopReason::callback);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(lm.position(), 27);
  // The context: 40 - 24 = 16 tokens fit.
  lm.reset();
  r = generate(lm, prompt, {.max_tokens = 100});
  EXPECT_EQ(r.stats.stop, StopReason::context_full);
  EXPECT_EQ(r.tokens.size(), 16u);
  EXPECT_EQ(lm.position(), 40);
  // A prompt with no room is the model's invalid_argument naming both numbers.
  EXPECT_TRUE(fails_with([&] { generate(lm, prompt, {.max_tokens = 1}); }, ErrorCode::invalid_argument, "24"));
  lm.reset();
  EXPECT_TRUE(fails_with([&] { generate(lm, prompt, {.max_tokens = 0}); }, ErrorCode::invalid_argument,
                         "max_tokens must be > 0, got 0"));
  EXPECT_TRUE(fails_with([&] { generate(lm, std::vector<int32_t>{}, {}); }, ErrorCode::invalid_argument,
                         "the prompt has no tokens"));
  EXPECT_TRUE(fails_with([&] { generate(lm, prompt, {.sampling = {.top_p = 2.0f}}); }, ErrorCode::invalid_argument,
                         "top_p must be in (0, 1]"));
  // An end-of-generation token: the tied model repeats its input, so after eos it says eos.
  LanguageModel tied = LanguageModel::load(device(), tiny("tied"));
  const std::vector<int32_t> to_eos(prompt.begin(), prompt.begin() + 13);
  ASSERT_EQ(to_eos.back(), tied.tokenizer().eos_id());
  ASSERT_EQ(tiny_golden()["models"]["tied"]["sequences"]["chat"]["argmax"][12].get<int32_t>(), to_eos.back());
  r = generate(tied, to_eos, {.max_tokens = 10});
  EXPECT_EQ(r.stats.stop, StopReason::end_of_generation);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(tied.position(), 13);
}

TEST_F(Generate, SeededSamplingIsReproducible) {
  LanguageModel lm = LanguageModel::load(device(), tiny("untied"));
  const std::vector<int32_t> prompt = tiny_ids("untied", "hello");
  const TextGenerationOptions o{.max_tokens = 24, .sampling = {.temperature = 1.5f, .seed = 99}};
  const auto a = generate(lm, prompt, o);
  lm.reset();
  const auto b = generate(lm, prompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  lm.reset();
  auto other = o;
  other.sampling.seed = 100;
  EXPECT_NE(generate(lm, prompt, other).tokens, a.tokens);
  // top_k 1 is greedy whatever the temperature.
  lm.reset();
  const auto greedy = generate(lm, prompt, {.max_tokens = 24});
  lm.reset();
  EXPECT_EQ(generate(lm, prompt, {.max_tokens = 24, .sampling = {.temperature = 2.0f, .top_k = 1}}).tokens,
            greedy.tokens);
}

// Turn two appends only its own tokens (the cache keeps turn one's prompt and the reply's own
// tokens), and its reply equals greedy generation over the same tokens from an empty cache.
TEST_F(Generate, ConversationsAppendOnlyTheNewTurn) {
  BriefChat c(device());
  auto& [lm, t, chat, o] = c;
  const GgufTokenizer& tok = lm.tokenizer();
  const auto first = chat.reply("hello", o);
  ASSERT_EQ(chat.messages().size(), 3u);
  EXPECT_EQ(chat.messages()[2].content, tok.decode(first.tokens));
  const std::string turn1 = t.apply({{"system", "Be brief."}, {"user", "hello"}});
  const std::vector<int32_t> turn1_ids = tok.encode(turn1);
  EXPECT_EQ(chat.last_turn_tokens(), static_cast<int64_t>(turn1_ids.size()));
  EXPECT_EQ(lm.position(), static_cast<int64_t>(turn1_ids.size() + first.tokens.size()));

  const auto second = chat.reply("more", o);
  // What turn two adds after the reply: the end of the assistant's turn and the user's.
  const std::string added = "<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n";
  std::vector<int32_t> cache = turn1_ids;
  cache.insert(cache.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> added_ids = tok.encode(added, false);
  EXPECT_EQ(chat.last_turn_tokens(), static_cast<int64_t>(added_ids.size()));
  cache.insert(cache.end(), added_ids.begin(), added_ids.end());
  EXPECT_EQ(t.apply(std::vector<ChatMessage>(chat.messages().begin(), chat.messages().end() - 1)),
            turn1 + tok.decode(first.tokens) + added);

  LanguageModel fresh = LanguageModel::load(device(), tiny("untied"));
  const auto want = generate(fresh, cache, o);
  EXPECT_EQ(second.tokens, want.tokens);
  EXPECT_EQ(second.text, want.text);

  // reset() keeps the system prompt and empties the cache; the first reply comes again.
  chat.reset();
  EXPECT_EQ(lm.position(), 0);
  ASSERT_EQ(chat.messages().size(), 1u);
  EXPECT_EQ(chat.reply("hello", o).tokens, first.tokens);
  // Someone else moving the cache makes the next reply start again from the messages' text.
  lm.truncate(2);
  const auto again = chat.reply("more", o);
  std::vector<ChatMessage> before(chat.messages().begin(), chat.messages().end() - 1);
  fresh.reset();
  EXPECT_EQ(again.tokens, generate(fresh, tok.encode(t.apply(before)), o).tokens);
  EXPECT_EQ(chat.last_turn_tokens(), static_cast<int64_t>(tok.encode(t.apply(before)).size()));
}

// A full context forgets the oldest turn by a context shift (LanguageModel::shift): its tokens,
// from the system prompt's end to the turn's end (the reply's closing "<|im_end|>\n"), leave the
// cache, and the next reply still appends only its own turn's tokens (the cache's text is a
// prefix of the shortened conversation's). With the system prompt's tokens kept in place.
TEST_F(Generate, ForgettingTheOldestTurnShiftsItOutOfTheCache) {
  BriefChat c(device());
  auto& [lm, t, chat, o] = c;
  const GgufTokenizer& tok = lm.tokenizer();
  const auto first = chat.reply("hello", o);
  const auto second = chat.reply("more", o);
  const int64_t before = lm.position();
  const std::vector<int32_t> head = tok.encode(t.apply({{"system", "Be brief."}}, false));
  const std::vector<int32_t> turn1 = tok.encode(t.apply({{"system", "Be brief."}, {"user", "hello"}}));
  const int64_t closing = static_cast<int64_t>(tok.encode("<|im_end|>\n", false).size());
  ASSERT_TRUE(chat.forget_oldest_turn());
  EXPECT_TRUE(chat.last_forget_shifted());
  // Gone: turn one's user part, its reply and the reply's closing tokens.
  EXPECT_EQ(lm.position(), before - (static_cast<int64_t>(turn1.size() - head.size()) +
                                     static_cast<int64_t>(first.tokens.size()) + closing));
  ASSERT_EQ(chat.messages().size(), 3u);
  EXPECT_EQ(chat.messages()[1].content, "more");
  const int64_t shifted = lm.position();
  chat.reply("again", o);
  const std::string added = "<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(chat.last_turn_tokens(), static_cast<int64_t>(tok.encode(added, false).size()));
  EXPECT_GT(lm.position(), shifted);
  // The only turn left with a reply goes too; then none is left to forget but the last.
  EXPECT_TRUE(chat.forget_oldest_turn());
  EXPECT_TRUE(chat.last_forget_shifted());
  EXPECT_TRUE(chat.forget_oldest_turn());  // the last turn: nothing after it to keep, run again
  EXPECT_FALSE(chat.last_forget_shifted());
  EXPECT_FALSE(chat.forget_oldest_turn());
  (void)second;
}

// ------------------------------------------------------------------------------ SmolLM2

TEST_F(Generate, SmolLM2GreedyMatchesTheFloat64Reference) {
  const FetchedModel& m = smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  const fs::path& path = m.path;
  LanguageModel lm = LanguageModel::load(device(), path, {.context = 256});
  const json golden = json::parse(std::ifstream(kGolden / "manifest.json"));
  for (const char* name : {"plain", "chat", "list"}) {
    const json& c = golden["cases"][name];
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(lm.tokenizer().encode(c["text"].get<std::string>()), ids) << name;
    std::vector<int32_t> want = c["greedy"]["ids"].get<std::vector<int32_t>>();
    const bool ends = c["greedy"]["first_end_of_generation"].is_number();
    if (ends) want.resize(c["greedy"]["first_end_of_generation"].get<size_t>());
    lm.reset();
    const auto r = generate(lm, ids, {.max_tokens = 32});
    EXPECT_EQ(r.tokens, want) << name;
    EXPECT_EQ(r.stats.stop, ends ? StopReason::end_of_generation : StopReason::max_tokens) << name;
    EXPECT_EQ(r.text, lm.tokenizer().decode(want)) << name;
    std::printf("SmolLM2 %s: %lld prompt tokens at %.1f tokens/s, %lld generated at %.1f tokens/s: %s\n", name,
                static_cast<long long>(r.stats.prompt_tokens), r.stats.prompt_tokens_per_second(),
                static_cast<long long>(r.stats.generated_tokens), r.stats.generation_tokens_per_second(),
                r.text.c_str());
  }
}

}  // namespace
}  // namespace vkformer::testing
