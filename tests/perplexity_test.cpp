// vkformer::perplexity (include/vkformer/perplexity.hpp) against llama-perplexity's method written
// out plainly here: on every family's tiny model (tests/golden_families), the first chunk's score
// from transformers' float32 logits for the same ids (an independent forward), and two chunks
// against each chunk run whole through append_all_logits from an empty cache, BOS first,
// with the negative log-likelihoods summed in double in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_goldens.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/io.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/perplexity.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The 40 ids of the family's "long" prompt (they start with BOS, id 1).
std::vector<int32_t> long_ids(const std::string& family) {
  return families_manifest()[family]["prompts"]["long"]["ids"].get<std::vector<int32_t>>();
}

LanguageModel load(const fs::path& gguf, int64_t context) {
  LanguageModelOptions o;
  o.context = context;
  return LanguageModel::load(test_device(), gguf, o);
}

// A copy of `gguf` whose tokenizer.ggml.add_bos_token (a GGUF bool, type 7) is true: the
// fixtures' converter wrote false, and llama-perplexity puts BOS first in every chunk only where
// the vocabulary adds it.
fs::path with_add_bos(const fs::path& gguf) {
  std::ifstream in(gguf, std::ios::binary);
  std::string b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string key = "tokenizer.ggml.add_bos_token";
  std::string lead(8, '\0');
  const uint64_t n = key.size();
  std::memcpy(lead.data(), &n, 8);
  const size_t at = b.find(lead + key);
  EXPECT_NE(at, std::string::npos) << gguf << " has no " << key;
  uint32_t type = 0;
  std::memcpy(&type, b.data() + at + 8 + key.size(), 4);
  EXPECT_EQ(type, 7u) << key;
  b[at + 8 + key.size() + 4] = 1;
  const fs::path out = scratch_dir("perplexity_test") / ("add_bos_" + gguf.filename().string());
  std::ofstream(out, std::ios::binary) << b;
  return out;
}

// -log softmax(row)[next] in double.
double nll(const float* row, int64_t vocab, int32_t next) {
  double max = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) max = std::max(max, double(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - max);
  return std::log(sum) + max - double(row[next]);
}

// llama-perplexity's estimate from a list of nll: exp(mean), exp(mean) · sqrt(var / (n - 1)).
struct Estimate {
  double ppl, error;
};
Estimate estimate(const std::vector<double>& nlls) {
  double s = 0, s2 = 0;
  for (double v : nlls) s += v, s2 += v * v;
  const double n = double(nlls.size()), mean = s / n, var = s2 / n - mean * mean;
  return {std::exp(mean), std::exp(mean) * std::sqrt(var / (n - 1))};
}

// The method written out: chunk c is tokens [c·ctx, (c+1)·ctx) with BOS first where the
// vocabulary adds it, run whole from an empty cache; logits at ctx/2 .. ctx-2 score the next token.
// Returns the running estimate after each chunk.
std::vector<Estimate> reference(LanguageModel& lm, const std::vector<int32_t>& tokens, int64_t ctx, int64_t chunks) {
  std::vector<double> nlls;
  std::vector<Estimate> out;
  const int64_t vocab = lm.config().vocab_size;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (lm.tokenizer().add_bos()) chunk[0] = lm.tokenizer().bos_id();
    lm.reset();
    const std::vector<float> logits = lm.append_all_logits(chunk);
    for (int64_t j = ctx / 2; j < ctx - 1; ++j) nlls.push_back(nll(&logits[j * vocab], vocab, chunk[j + 1]));
    out.push_back(estimate(nlls));
  }
  lm.reset();
  return out;
}

class Perplexity : public DeviceTestWithParam<std::string> {};

// The first chunk of 20 of the long prompt (ids 0..19, scored on 11..19) from transformers'
// logits: the library's forward, chunking and log-softmax together against an independent forward.
// The bound: each nll moves by at most 2 · max |Δlogit|, and the family test holds the logits
// within 1e-4 of the largest one.
TEST_P(Perplexity, FirstChunkEqualsTheScoreOfTransformersLogits) {
  const std::string family = GetParam();
  const std::vector<int32_t> ids = long_ids(family);
  ASSERT_EQ(ids.size(), 40u);
  const json& p = families_manifest()[family]["prompts"]["long"];
  const std::vector<float> golden = read_npy(family_file(p["logits"])).to_f32();
  LanguageModel lm = load(family_gguf(family), 20);
  const int64_t vocab = lm.config().vocab_size;
  ASSERT_EQ(golden.size(), ids.size() * size_t(vocab));
  std::vector<double> nlls;
  double max_logit = 0;
  for (int64_t j = 10; j < 19; ++j) {
    nlls.push_back(nll(&golden[j * vocab], vocab, ids[j + 1]));
    for (int64_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, std::abs(double(golden[j * vocab + i])));
  }
  const Estimate want = estimate(nlls);
  const PerplexityResult r = perplexity(lm, ids, {.chunks = 1});
  EXPECT_EQ(r.text_tokens, 40);
  EXPECT_EQ(r.context, 20);
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.scored_tokens, 9);
  ASSERT_EQ(r.chunk_ppl.size(), 1u);
  const double bound = 2 * 1e-4 * max_logit;
  EXPECT_NEAR(r.mean_nll, std::log(want.ppl), bound) << family;
  EXPECT_NEAR(std::log(r.ppl), std::log(want.ppl), bound) << family;
  EXPECT_NEAR(r.ppl_error / r.ppl, want.error / want.ppl, 10 * bound) << family;
  EXPECT_EQ(lm.position(), 0);
  std::printf("%s: first chunk PPL %.6f, transformers' logits %.6f (bound on |dlog| %.1e)\n", family.c_str(), r.ppl,
              want.ppl, bound);
}

// Two chunks of 16 of the long prompt (the last 8 ids unused), the second with BOS in place of
// its first id (the vocabulary made to add BOS), each against the whole chunk run alone; the
// same with the chunk length given by the options under a longer cache.
TEST_P(Perplexity, EveryChunkRunsFromAnEmptyCacheWithBosFirstAndScoresItsSecondHalf) {
  const std::string family = GetParam();
  const std::vector<int32_t> ids = long_ids(family);
  LanguageModel lm = load(with_add_bos(family_gguf(family)), 16);
  ASSERT_TRUE(lm.tokenizer().add_bos());
  ASSERT_NE(ids[16], lm.tokenizer().bos_id()) << "the second chunk's first id must differ from BOS";
  const std::vector<Estimate> want = reference(lm, ids, 16, 2);
  const PerplexityResult r = perplexity(lm, ids);
  ASSERT_EQ(r.chunks, 2);
  EXPECT_EQ(r.scored_tokens, 14);
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(r.chunk_ppl[c], want[c].ppl, 1e-5 * want[c].ppl) << family << " chunk " << c;
    EXPECT_NEAR(r.chunk_ppl_error[c], want[c].error, 1e-4 * want[c].error) << family << " chunk " << c;
  }
  EXPECT_DOUBLE_EQ(r.ppl, r.chunk_ppl[1]);
  EXPECT_NEAR(std::exp(r.mean_nll), r.ppl, 1e-12 * r.ppl);

  LanguageModel longer = load(with_add_bos(family_gguf(family)), 64);
  const PerplexityResult r16 = perplexity(longer, ids, {.context = 16});
  ASSERT_EQ(r16.chunks, 2);
  EXPECT_NEAR(r16.ppl, want[1].ppl, 1e-5 * want[1].ppl) << family;
  std::printf("%s: chunk PPLs %.6f, %.6f; each chunk alone %.6f, %.6f\n", family.c_str(), r.chunk_ppl[0],
              r.chunk_ppl[1], want[0].ppl, want[1].ppl);
}

INSTANTIATE_TEST_SUITE_P(Golden, Perplexity, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

class PerplexityRules : public DeviceTest {};

// --chunks, the callback's view and a stop: what was scored is whole chunks.
TEST_F(PerplexityRules, ChunksAndTheCallbackBoundTheWork) {
  const std::vector<int32_t> ids = long_ids("llama2");
  LanguageModel lm = load(family_gguf("llama2"), 16);
  const PerplexityResult all = perplexity(lm, ids);
  const PerplexityResult one = perplexity(lm, ids, {.chunks = 1});
  ASSERT_EQ(one.chunks, 1);
  EXPECT_DOUBLE_EQ(one.ppl, all.chunk_ppl[0]);
  // More chunks than the text holds: the text's.
  EXPECT_EQ(perplexity(lm, ids, {.chunks = 9}).chunks, 2);

  std::vector<PerplexityProgress> seen;
  const PerplexityResult stopped = perplexity(lm, ids, {}, [&](const PerplexityProgress& p) {
    seen.push_back(p);
    return false;
  });
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.chunks, 1);  // the chunk's one pass over 7 tokens ended it
  EXPECT_DOUBLE_EQ(stopped.ppl, all.chunk_ppl[0]);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].chunk_done);
  EXPECT_EQ(seen[0].chunks, 2);
  EXPECT_EQ(seen[0].tokens_done, 15);   // 8 context + 7 scored inputs; the 16th is never run
  EXPECT_EQ(seen[0].tokens_total, 30);
  EXPECT_EQ(lm.position(), 0);
  // False after the last chunk's last pass stops nothing.
  const PerplexityResult last = perplexity(lm, ids, {}, [](const PerplexityProgress& p) {
    return !(p.chunk_done && p.chunk + 1 == p.chunks);
  });
  EXPECT_FALSE(last.stopped);
  EXPECT_EQ(last.chunks, 2);
}

TEST_F(PerplexityRules, TheTextIsTokenizedAsLlamaPerplexityDoes) {
  const fs::path tiny = fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_untied.gguf";
  LanguageModel lm = load(tiny, 32);
  const GgufTokenizer& tok = lm.tokenizer();
  // Special tokens' text stays text (parse_special false); one trailing newline goes, as -f drops it.
  const std::string text = "<|im_start|>user\nHello, world!\n\n";
  EXPECT_EQ(perplexity_tokens(lm, text), tok.encode("<|im_start|>user\nHello, world!\n", true, false));
  EXPECT_NE(perplexity_tokens(lm, text), tok.encode("<|im_start|>user\nHello, world!\n", true, true));
  EXPECT_EQ(perplexity_tokens(lm, "Hello\n"), tok.encode("Hello", true, false));
}

TEST_F(PerplexityRules, BadArgumentsAreRefusedWithTheirNumbers) {
  const std::vector<int32_t> ids = long_ids("llama2");
  LanguageModel lm = load(family_gguf("llama2"), 20);
  auto message = [&](std::span<const int32_t> tokens, const PerplexityOptions& o) {
    try {
      perplexity(lm, tokens, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(std::span(ids).first(39), {}),
            "perplexity: the text has 39 tokens; a context of 20 needs at least 40 (two chunks)");
  EXPECT_EQ(message(ids, {.context = 15}),
            "perplexity: context 15 is outside 16..20 (the model's KV cache holds 20)");
  EXPECT_EQ(message(ids, {.context = 21}),
            "perplexity: context 21 is outside 16..20 (the model's KV cache holds 20)");
  EXPECT_EQ(message(ids, {.chunks = -1}), "perplexity: chunks is -1, expected >= 0 (0: all)");
  EXPECT_EQ(lm.position(), 0);
}

}  // namespace
}  // namespace vkformer::testing
