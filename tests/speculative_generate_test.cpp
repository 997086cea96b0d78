// Speculative decoding in generate() (vkformer/generate.hpp: SpeculativeOptions) keeps greedy
// output exactly plain decoding's, with both proposers:
//   - every family's tiny model (tests/golden_families) on 20 prompts, prompt lookup (ngram) and
//     the family's Q8_0 file drafting for its F32 file (a draft that disagrees now and then);
//   - SmolLM2-135M-Instruct Q4_1 ($VKFORMER_SMOLLM2_GGUF or scripts/fetch_smollm2.sh) on 20
//     prompts, prompt lookup and the same file with f16 activations as its draft.
// Each suite checks that proposals were made, kept and rejected, so both paths of the
// verification were taken; and bad options and a draft of another vocabulary are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fetched_models.hpp"
#include "family_goldens.hpp"
#include "test_device.hpp"
#include "vkformer/error.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

LanguageModel load_family(const std::string& family, const char* type, int64_t context = 128,
                          DType activations = DType::f32) {
  LanguageModelOptions o;
  o.context = context;
  o.activations = activations;
  return LanguageModel::load(test_device(), family_gguf(family, type), o);
}

struct Totals {
  int64_t drafted = 0, accepted = 0, generated = 0, passes = 0;
  void add(const TextGenerationStats& s) {
    drafted += s.drafted_tokens;
    accepted += s.accepted_tokens;
    generated += s.generated_tokens;
    passes += s.passes;
  }
  void expect_both_paths(const std::string& what) const {
    EXPECT_GT(accepted, 0) << what << ": no proposal was kept";
    EXPECT_GT(drafted, accepted) << what << ": no proposal was rejected";
    std::printf("%s: %lld drafted, %lld kept (%.0f%%), %.2f tokens per pass\n", what.c_str(),
                static_cast<long long>(drafted), static_cast<long long>(accepted),
                drafted ? 100.0 * static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0,
                passes ? static_cast<double>(generated) / static_cast<double>(passes) : 0.0);
  }
};

struct Plain {
  TextGenerationResult result;
  int64_t end = 0;  // the model's position after it
};
Plain plain_greedy(LanguageModel& lm, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  lm.reset();
  Plain p{generate(lm, prompt, {.max_tokens = max_tokens}), 0};
  p.end = lm.position();
  return p;
}

// The same prompt with `spec` as plain greedy decoding: identical tokens, text, stop and cache.
void expect_same_greedy(LanguageModel& lm, const std::vector<int32_t>& prompt, const Plain& want, int64_t max_tokens,
                        const SpeculativeOptions& spec, Totals& totals, const std::string& what) {
  const TextGenerationResult& plain = want.result;
  const int64_t plain_end = want.end;
  lm.reset();
  const TextGenerationResult fast = generate(lm, prompt, {.max_tokens = max_tokens, .speculative = spec});
  EXPECT_EQ(fast.tokens, plain.tokens) << what;
  EXPECT_EQ(fast.text, plain.text) << what;
  EXPECT_EQ(fast.stats.stop, plain.stats.stop) << what;
  EXPECT_EQ(lm.position(), plain_end) << what << ": the cache holds what plain decoding leaves";
  totals.add(fast.stats);
}

class SpeculativeFamilies : public ::testing::TestWithParam<std::string> {
 protected:
  // 20 prompts from the golden's 40 ids: a stretch of them, then its first tokens again (text
  // that repeats, as prompt lookup needs).
  static std::vector<std::vector<int32_t>> prompts(const std::string& family) {
    const auto ids = families_manifest()[family]["prompts"]["long"]["ids"].get<std::vector<int32_t>>();
    std::vector<std::vector<int32_t>> out;
    for (size_t j = 0; j < 20; ++j) {
      std::vector<int32_t> p(ids.begin() + static_cast<ptrdiff_t>(j), ids.begin() + static_cast<ptrdiff_t>(j + 8 + j % 5));
      p.insert(p.end(), p.begin(), p.begin() + 3);
      out.push_back(p);
    }
    return out;
  }
};

TEST_P(SpeculativeFamilies, GreedyPromptLookupIsPlainDecoding) {
  LanguageModel lm = load_family(GetParam(), "f32");
  Totals totals;
  int n = 0;
  for (const auto& p : prompts(GetParam()))
    expect_same_greedy(lm, p, plain_greedy(lm, p, 24), 24, {.mode = SpeculativeMode::ngram, .draft_max = 8, .adaptive = false}, totals,
                       GetParam() + " ngram prompt " + std::to_string(n++));
  totals.expect_both_paths(GetParam() + " ngram");
}

TEST_P(SpeculativeFamilies, GreedyDraftModelIsPlainDecoding) {
  LanguageModel lm = load_family(GetParam(), "f32");
  // Two drafts by turns: the same model's Q8_0 file (it mostly agrees) and the family's larger
  // K-quant model (other weights, the same vocabulary: it mostly does not).
  LanguageModel close = load_family(GetParam(), "q8_0");
  const json& k = families_manifest()[GetParam()]["k_quants"]["files"];
  LanguageModel other = LanguageModel::load(test_device(), family_file(k.begin().value()["gguf"]),
                                            {.context = 128});
  Totals totals;
  int n = 0;
  for (const auto& p : prompts(GetParam())) {
    LanguageModel* draft = n % 2 ? &other : &close;
    expect_same_greedy(lm, p, plain_greedy(lm, p, 24), 24,
                       {.mode = SpeculativeMode::draft, .draft_model = draft, .draft_max = 6, .draft_p_min = 0.0f, .adaptive = false},
                       totals, GetParam() + " draft prompt " + std::to_string(n++));
  }
  totals.expect_both_paths(GetParam() + " draft");
}

INSTANTIATE_TEST_SUITE_P(Golden, SpeculativeFamilies, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// Conversations carry speculation across turns: each reply as without it.
TEST(SpeculativeConversation, RepliesAreThoseWithoutSpeculation) {
  LanguageModel lm = load_family("llama3", "f32", 256);
  LanguageModel draft = load_family("llama3", "q8_0", 256);
  // The tiny models have no chat template of their own: ChatML, whose pieces their byte-level
  // vocabulary spells out.
  const ChatTemplate t = ChatTemplate::chatml();
  std::vector<std::vector<int32_t>> want;
  {
    Conversation chat(lm, t);
    for (const char* turn : {"ab ab", "cd"}) want.push_back(chat.reply(turn, {.max_tokens = 10}).tokens);
  }
  for (SpeculativeMode mode : {SpeculativeMode::ngram, SpeculativeMode::draft}) {
    Conversation chat(lm, t);
    int i = 0;
    for (const char* turn : {"ab ab", "cd"}) {
      const auto r = chat.reply(turn, {.max_tokens = 10, .speculative = {.mode = mode, .draft_model = &draft, .draft_max = 4, .draft_p_min = 0.0f}});
      EXPECT_EQ(r.tokens, want[static_cast<size_t>(i++)]) << to_string(mode) << " turn " << i;
    }
  }
}

// A draft model's cache carries the conversation from turn to turn: after each reply it holds
// every earlier turn (not only the last turn's tokens, run again from an empty cache), and a
// draft of the target's own weights, seeing what the target sees, proposes only tokens the
// target keeps. Its replies are those of plain decoding; prompt lookup sees the earlier turns too.
TEST(SpeculativeConversation, TheDraftKeepsTheConversationAcrossTurns) {
  LanguageModel lm = load_family("llama3", "f32", 256);
  LanguageModel draft = load_family("llama3", "f32", 256);
  const ChatTemplate t = ChatTemplate::chatml();
  const char* turns[] = {"ab ab cd", "ef", "ab cd"};
  std::vector<std::vector<int32_t>> want;
  {
    Conversation chat(lm, t);
    for (const char* turn : turns) want.push_back(chat.reply(turn, {.max_tokens = 12}).tokens);
  }
  Conversation chat(lm, t);
  for (size_t i = 0; i < std::size(turns); ++i) {
    const int64_t before = lm.position();
    const auto r = chat.reply(turns[i], {.max_tokens = 12,
                                         .speculative = {.mode = SpeculativeMode::draft, .draft_model = &draft,
                                                         .draft_max = 4, .draft_p_min = 0.0f, .adaptive = false}});
    EXPECT_EQ(r.tokens, want[i]) << "turn " << i;
    std::printf("turn %zu: cache %lld -> %lld, the draft's %lld; %lld drafted, %lld kept\n", i,
                static_cast<long long>(before), static_cast<long long>(lm.position()),
                static_cast<long long>(draft.position()), static_cast<long long>(r.stats.drafted_tokens),
                static_cast<long long>(r.stats.accepted_tokens));
    EXPECT_GE(draft.position(), before + chat.last_turn_tokens()) << "turn " << i << ": the draft lacks earlier turns";
    EXPECT_GT(r.stats.drafted_tokens, 0) << "turn " << i;
    EXPECT_EQ(r.stats.accepted_tokens, r.stats.drafted_tokens) << "turn " << i << ": the draft saw another context";
  }
}

TEST(SpeculativeArguments, BadOptionsAndAnotherVocabularyAreRefusedByName) {
  LanguageModel lm = load_family("llama2", "f32");
  const std::vector<int32_t> prompt{1, 2, 3};
  auto error_of = [&](const SpeculativeOptions& s) -> std::string {
    try {
      generate(lm, prompt, {.max_tokens = 4, .speculative = s});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error_of({.mode = SpeculativeMode::ngram, .draft_max = 0}).find("draft_max must be in 1..63"), std::string::npos);
  EXPECT_NE(error_of({.mode = SpeculativeMode::ngram, .draft_max = 1000}).find("got 1000"), std::string::npos);
  EXPECT_NE(error_of({.mode = SpeculativeMode::ngram, .draft_max = 4, .draft_min = 5}).find("draft_min must be in 0..draft_max (4), got 5"), std::string::npos);
  EXPECT_NE(error_of({.mode = SpeculativeMode::ngram, .draft_p_min = 1.5f}).find("draft_p_min must be in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of({.mode = SpeculativeMode::draft}).find("mode draft needs a draft_model"), std::string::npos);
  // The tiny llama of tests/golden_llama has a vocabulary of its own (384 tokens, not 320).
  LanguageModel other = LanguageModel::load(test_device(), fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_tied.gguf");
  const std::string e = error_of({.mode = SpeculativeMode::draft, .draft_model = &other});
  EXPECT_NE(e.find("draft model: its vocabulary is not the target's"), std::string::npos) << e;
  std::printf("%s\n", e.c_str());
  EXPECT_EQ(lm.position(), 0) << "nothing was run";
}

// ------------------------------------------------------------------------------ SmolLM2

const char* const kSmolPrompts[] = {
    "Repeat exactly: The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
    "List the days of the week: Monday, Tuesday, Wednesday,",
    "Count: one, two, three, four, five,",
    "The capital of France is",
    "Once upon a time, there was a little robot who",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nCopy this sentence: cats like warm milk.<|im_end|>\n<|im_start|>assistant\n",
    "for i in range(10):\n    print(i)\nfor j in range(10):\n",
    "A, B, C, D, E, F, G,",
    "Water boils at 100 degrees Celsius. Water freezes at",
    "The best way to learn a language is",
    "Name three colors: red, green,",
    "int main() {\n  int x = 0;\n  int y = 1;\n  int z =",
    "Roses are red, violets are blue,",
    "Summarize: The meeting was moved from Monday to Tuesday because the room was booked.",
    "1 2 3 4 5 6 7 8",
    "<|im_start|>user\nTranslate to French: good morning<|im_end|>\n<|im_start|>assistant\n",
    "Hello, my name is",
    "The sun rises in the east and sets in the",
};

TEST(SpeculativeSmolLM2, GreedyIsPlainDecodingWithBothProposers) {
  const FetchedModel& m = smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  LanguageModel lm = LanguageModel::load(test_device(), m.path, {.context = 256});
  LanguageModel draft = LanguageModel::load(test_device(), m.path, {.activations = DType::f16, .context = 256});
  Totals ngram, drafted;
  int n = 0;
  for (const char* text : kSmolPrompts) {
    const std::vector<int32_t> ids = lm.tokenizer().encode(text, true, true);
    const std::string what = "prompt " + std::to_string(n++);
    const Plain plain = plain_greedy(lm, ids, 16);
    // draft_max 4 (the families' test above takes 8): a verification pass of 1 + 8 tokens runs a
    // 16-row graph, ~4.9x a decoding step on lavapipe, against ~2.7x for 1 + 4 (bench/RESULTS.md,
    // "Verification passes by rows"); this case was the slowest suite of CI.
    expect_same_greedy(lm, ids, plain, 16, {.mode = SpeculativeMode::ngram, .draft_max = 4, .adaptive = false}, ngram, what + " ngram");
    expect_same_greedy(lm, ids, plain, 16, {.mode = SpeculativeMode::draft, .draft_model = &draft, .draft_max = 4, .draft_p_min = 0.3f, .adaptive = false},
                       drafted, what + " draft");
  }
  EXPECT_GT(ngram.accepted, 0);
  EXPECT_GT(ngram.drafted, ngram.accepted);
  std::printf("SmolLM2 ngram: %lld drafted, %lld kept; draft: %lld drafted, %lld kept\n",
              static_cast<long long>(ngram.drafted), static_cast<long long>(ngram.accepted),
              static_cast<long long>(drafted.drafted), static_cast<long long>(drafted.accepted));
  EXPECT_GT(drafted.accepted, 0);
}

}  // namespace
}  // namespace vkformer::testing
