// Every decoder-only family vkformer loads (src/models/llm/family_*.cpp) against Hugging Face
// transformers: tiny random-weight models of each family's real configuration, converted by
// llama.cpp's convert_hf_to_gguf.py, with transformers' float32 logits at every position of
// fixed id prompts and a greedy continuation (tests/golden_families, made by
// tools/make_family_models.py). Each family keeps its features: biases (qwen2), q/k norms
// (qwen3, gemma3), post-norms and GeGLU (gemma2/3), soft-capping (gemma2), sliding windows of 6
// rows under a 40-token prompt (mistral, gemma2, gemma3, phi3), Llama 3.1's rope_freqs, Gemma 3's
// linear RoPE scaling and local base, Phi-3's fused attn_qkv and gate/up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "test_device.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kDir = fs::path(VKF_FAMILIES_GOLDEN_DIR);

const json& manifest() {
  static const json m = json::parse(std::ifstream(kDir / "manifest.json"));
  return m;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (auto it = manifest().begin(); it != manifest().end(); ++it) names.push_back(it.key());
  return names;
}

struct Golden {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids × vocab]
};

Golden golden(const std::string& family, const std::string& prompt) {
  const json& p = manifest()[family]["prompts"][prompt];
  return {p["ids"].get<std::vector<int32_t>>(), read_npy(kDir / p["logits"].get<std::string>()).to_f32()};
}

LanguageModel load(const std::string& family, const std::string& type, DType activations = DType::f32) {
  LanguageModelOptions o;
  o.context = 128;
  o.activations = activations;
  return LanguageModel::load(test_device(), kDir / manifest()[family]["gguf"][type].get<std::string>(), o);
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

// max |got - want| over `want`'s rows, as a fraction of max |want|.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    e = std::max(e, std::abs(static_cast<double>(got[i]) - want[i]));
  return e / max_abs(want);
}

int64_t argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

class Families : public ::testing::TestWithParam<std::string> {};

// Every position of every prompt within 1e-4 of the largest logit.
TEST_P(Families, F32LogitsMatchTransformersAtEveryPosition) {
  LanguageModel lm = load(GetParam(), "f32");
  for (const char* prompt : {"one", "short", "long"}) {
    const Golden g = golden(GetParam(), prompt);
    lm.reset();
    const double e = relative_error(lm.append_all_logits(g.ids), g.logits);
    EXPECT_LE(e, 1e-4) << GetParam() << " prompt " << prompt;
    std::printf("%s f32 %s (%zu ids): max |dlogit| / max|logit| %.2e\n", GetParam().c_str(), prompt, g.ids.size(), e);
  }
}

// The same positions decoded one token at a time through the KV cache (the decode graph, its
// masks and the sliding window's key range) after a 5-token prompt pass.
TEST_P(Families, KvCachedDecodeMatchesTheFullForward) {
  LanguageModel lm = load(GetParam(), "f32");
  const Golden g = golden(GetParam(), "long");
  const int64_t vocab = lm.config().vocab_size;
  const size_t first = 5;
  std::vector<float> got = lm.append_all_logits(std::span<const int32_t>(g.ids).first(first));
  for (size_t i = first; i < g.ids.size(); ++i) {
    std::vector<float> row = lm.append(std::span<const int32_t>(g.ids).subspan(i, 1));
    got.insert(got.end(), row.begin(), row.end());
  }
  ASSERT_EQ(static_cast<int64_t>(got.size()), static_cast<int64_t>(g.ids.size()) * vocab);
  const double e = relative_error(got, g.logits);
  EXPECT_LE(e, 1e-4) << GetParam();
  std::printf("%s f32 one token at a time: %.2e\n", GetParam().c_str(), e);
}

TEST_P(Families, Greedy32TokensIdenticalToTransformers) {
  LanguageModel lm = load(GetParam(), "f32");
  const json& greedy = manifest()[GetParam()]["greedy"];
  const Golden g = golden(GetParam(), greedy["prompt"].get<std::string>());
  const std::vector<int32_t> want = greedy["tokens"].get<std::vector<int32_t>>();
  std::vector<float> logits = lm.append(g.ids);
  std::vector<int32_t> got;
  for (size_t i = 0; i < want.size(); ++i) {
    got.push_back(static_cast<int32_t>(argmax(logits.data(), lm.config().vocab_size)));
    if (i + 1 < want.size()) logits = lm.append(std::span<const int32_t>(got).last(1));
  }
  EXPECT_EQ(got, want) << GetParam();
}

TEST_P(Families, F16WeightsWithin1e2) {
  LanguageModel lm = load(GetParam(), "f16");
  for (const char* prompt : {"short", "long"}) {
    const Golden g = golden(GetParam(), prompt);
    lm.reset();
    const double e = relative_error(lm.append_all_logits(g.ids), g.logits);
    EXPECT_LE(e, 1e-2) << GetParam() << " " << prompt;
    std::printf("%s f16 weights %s: %.2e\n", GetParam().c_str(), prompt, e);
  }
}

// f16 activations and KV cache (the masks, soft-caps and per-head norms in f16 too) on the f32
// weights: the long prompt in one pass and its last 8 tokens one at a time.
TEST_P(Families, F16ActivationsWithin1e2) {
  LanguageModel lm = load(GetParam(), "f32", DType::f16);
  const Golden g = golden(GetParam(), "long");
  const size_t first = g.ids.size() - 8;
  std::vector<float> got = lm.append_all_logits(std::span<const int32_t>(g.ids).first(first));
  for (size_t i = first; i < g.ids.size(); ++i) {
    std::vector<float> row = lm.append(std::span<const int32_t>(g.ids).subspan(i, 1));
    got.insert(got.end(), row.begin(), row.end());
  }
  const double e = relative_error(got, g.logits);
  EXPECT_LE(e, 1e-2) << GetParam();
  std::printf("%s f16 activations long: %.2e\n", GetParam().c_str(), e);
}

// Q8_0 weights against the same model with its weights rounded through Q8_0 (transformers on
// the dequantized weights): every position of the long prompt within 1e-4 and the same top token
// (teacher-forced), however near a tie, since only the arithmetic differs. How far Q8_0 moves the
// logits from the f32 model is recorded, not asserted.
TEST_P(Families, Q8_0MatchesTheDequantizedWeightsTeacherForced) {
  LanguageModel lm = load(GetParam(), "q8_0");
  const json& ref = manifest()[GetParam()]["q8_0_dequantized"];
  const Golden g = golden(GetParam(), ref["prompt"].get<std::string>());
  const std::vector<float> want = read_npy(kDir / ref["logits"].get<std::string>()).to_f32();
  const int64_t vocab = lm.config().vocab_size, n = static_cast<int64_t>(g.ids.size());
  const std::vector<float> got = lm.append_all_logits(g.ids);
  const double e = relative_error(got, want);
  EXPECT_LE(e, 1e-4) << GetParam();
  int64_t agree = 0;
  for (int64_t i = 0; i < n; ++i) agree += argmax(got.data() + i * vocab, vocab) == argmax(want.data() + i * vocab, vocab);
  EXPECT_EQ(agree, n) << GetParam() << ": top-1 agrees at " << agree << " of " << n << " positions";
  int64_t agree_f32 = 0;
  for (int64_t i = 0; i < n; ++i)
    agree_f32 += argmax(got.data() + i * vocab, vocab) == argmax(g.logits.data() + i * vocab, vocab);
  std::printf("%s q8_0: %.2e against the dequantized weights, top-1 %lld/%lld; against the f32 model %.2e, "
              "top-1 %lld/%lld\n",
              GetParam().c_str(), e, static_cast<long long>(agree), static_cast<long long>(n),
              relative_error(got, g.logits), static_cast<long long>(agree_f32), static_cast<long long>(n));
}

// What a family's file asks for that vkformer lacks is refused naming the key or tensor and the
// file, never computed as something else: YaRN scaling (gemma3's "linear" made another type),
// a tensor the family does not use (phi3's fused attn_qkv renamed).
fs::path patched_copy(const std::string& family, const std::string& from, const std::string& to) {
  const fs::path src = kDir / manifest()[family]["gguf"]["f32"].get<std::string>();
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  const fs::path out = fs::temp_directory_path() / ("llm_families_test_" + family + ".gguf");
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

std::string load_error(const fs::path& path) {
  try {
    LanguageModel::load(test_device(), path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(FamilyFeatures, UnsupportedRopeScalingAndUnknownTensorsAreRefusedByName) {
  const std::string yarn = load_error(patched_copy("gemma3", std::string("\x06\0\0\0\0\0\0\0linear", 14),
                                                   std::string("\x06\0\0\0\0\0\0\0yarnv2", 14)));
  EXPECT_NE(yarn.find("gemma3.rope.scaling.type is 'yarnv2'; vkformer supports 'none' and 'linear'"),
            std::string::npos)
      << yarn;
  EXPECT_NE(yarn.find("llm_families_test_gemma3.gguf"), std::string::npos) << yarn;
  const std::string tensor = load_error(patched_copy("phi3", "blk.1.attn_qkv.weight", "blk.1.attn_qkx.weight"));
  EXPECT_NE(tensor.find("tensor blk.1.attn_qkv.weight is missing"), std::string::npos) << tensor;
  const std::string arch = load_error(patched_copy("qwen2", std::string("\x05\0\0\0\0\0\0\0qwen2", 13),
                                                   std::string("\x05\0\0\0\0\0\0\0qwen9", 13)));
  EXPECT_NE(arch.find("general.architecture is 'qwen9'; supported: llama, qwen2, qwen3, gemma2, gemma3, phi3"),
            std::string::npos)
      << arch;
}

INSTANTIATE_TEST_SUITE_P(Golden, Families, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace vkformer::testing
