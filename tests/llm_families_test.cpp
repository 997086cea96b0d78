// Every decoder-only family vkformer loads (src/models/llm/family_*.cpp) against Hugging Face
// transformers: tiny random-weight models of each family's real configuration, converted by
// llama.cpp's convert_hf_to_gguf.py, with transformers' float32 logits at every position of
// fixed id prompts and a greedy continuation (tests/golden_families, made by
// tests/fixtures/make_family_models.py). Each family keeps its features: biases (qwen2), q/k norms
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
#include <map>
#include <ostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "family_goldens.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/io.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Golden {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids × vocab]
};

Golden golden(const std::string& family, const std::string& prompt) {
  const json& p = families_manifest()[family]["prompts"][prompt];
  return {p["ids"].get<std::vector<int32_t>>(), read_npy(family_file(p["logits"])).to_f32()};
}

LanguageModel load(const std::string& family, const std::string& type, DType activations = DType::f32) {
  LanguageModelOptions o;
  o.context = 128;
  o.activations = activations;
  return LanguageModel::load(test_device(), family_gguf(family, type), o);
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

// got within `tolerance` of want (max |dlogit| / max|logit|), the error printed after `what`.
void expect_logits_within(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                          const std::string& what) {
  const double e = relative_error(got, want);
  EXPECT_LE(e, tolerance) << what;
  std::printf("%s: max |dlogit| / max|logit| %.2e\n", what.c_str(), e);
}

// Every position's logits of `ids`: the first `first` tokens in one prompt pass, the others one at
// a time through the KV cache.
std::vector<float> prompt_then_decode(LanguageModel& lm, std::span<const int32_t> ids, size_t first) {
  std::vector<float> got = lm.append_all_logits(ids.first(first));
  for (size_t i = first; i < ids.size(); ++i) {
    std::vector<float> row = lm.append(ids.subspan(i, 1));
    got.insert(got.end(), row.begin(), row.end());
  }
  return got;
}

class Families : public ::testing::TestWithParam<std::string> {};

// Every position of every prompt within 1e-4 of the largest logit.
TEST_P(Families, F32LogitsMatchTransformersAtEveryPosition) {
  LanguageModel lm = load(GetParam(), "f32");
  for (const char* prompt : {"one", "short", "long"}) {
    const Golden g = golden(GetParam(), prompt);
    lm.reset();
    expect_logits_within(lm.append_all_logits(g.ids), g.logits, 1e-4,
                         GetParam() + " f32 " + prompt + " (" + std::to_string(g.ids.size()) + " ids)");
  }
}

// The same positions decoded one token at a time through the KV cache (the decode graph, its
// masks and the sliding window's key range) after a 5-token prompt pass.
TEST_P(Families, KvCachedDecodeMatchesTheFullForward) {
  LanguageModel lm = load(GetParam(), "f32");
  const Golden g = golden(GetParam(), "long");
  const int64_t vocab = lm.config().vocab_size;
  const std::vector<float> got = prompt_then_decode(lm, g.ids, 5);
  ASSERT_EQ(static_cast<int64_t>(got.size()), static_cast<int64_t>(g.ids.size()) * vocab);
  expect_logits_within(got, g.logits, 1e-4, GetParam() + " f32 one token at a time");
}

TEST_P(Families, Greedy32TokensIdenticalToTransformers) {
  LanguageModel lm = load(GetParam(), "f32");
  const json& greedy = families_manifest()[GetParam()]["greedy"];
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

// The same continuation with every choice made on the device (append_greedy: the prompt's
// through the prompt chunk's greedy graph, each step's through the decode graph's).
TEST_P(Families, Greedy32TokensOnTheDeviceIdenticalToTransformers) {
  LanguageModel lm = load(GetParam(), "f32");
  const json& greedy = families_manifest()[GetParam()]["greedy"];
  const Golden g = golden(GetParam(), greedy["prompt"].get<std::string>());
  const std::vector<int32_t> want = greedy["tokens"].get<std::vector<int32_t>>();
  GreedyToken t = lm.append_greedy(g.ids);
  std::vector<int32_t> got;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(t.non_finite, -1) << GetParam() << " step " << i;
    got.push_back(t.token);
    if (i + 1 < want.size()) t = lm.append_greedy(std::span<const int32_t>(got).last(1));
  }
  EXPECT_EQ(got, want) << GetParam();
}

TEST_P(Families, F16WeightsWithin1e2) {
  LanguageModel lm = load(GetParam(), "f16");
  for (const char* prompt : {"short", "long"}) {
    const Golden g = golden(GetParam(), prompt);
    lm.reset();
    expect_logits_within(lm.append_all_logits(g.ids), g.logits, 1e-2, GetParam() + " f16 weights " + prompt);
  }
}

// f16 activations and KV cache (the masks, soft-caps and per-head norms in f16 too) on the f32
// weights: the long prompt in one pass and its last 8 tokens one at a time.
TEST_P(Families, F16ActivationsWithin1e2) {
  LanguageModel lm = load(GetParam(), "f32", DType::f16);
  const Golden g = golden(GetParam(), "long");
  expect_logits_within(prompt_then_decode(lm, g.ids, g.ids.size() - 8), g.logits, 1e-2,
                       GetParam() + " f16 activations long");
}

// Q8_0 weights against the same model with its weights rounded through Q8_0 (transformers on
// the dequantized weights): every position of the long prompt within 1e-4 and the same top token
// (teacher-forced), however near a tie, since only the arithmetic differs. How far Q8_0 moves the
// logits from the f32 model is recorded, not asserted.
TEST_P(Families, Q8_0MatchesTheDequantizedWeightsTeacherForced) {
  LanguageModel lm = load(GetParam(), "q8_0");
  const json& ref = families_manifest()[GetParam()]["q8_0_dequantized"];
  const Golden g = golden(GetParam(), ref["prompt"].get<std::string>());
  const std::vector<float> want = read_npy(family_file(ref["logits"])).to_f32();
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

// K-quant mixes as llama.cpp's llama-quantize writes them (Q4_K_M for every family, Q5_K_M for
// two), on each family's wider model (width and FFN 256, heads of 64: every matrix row is whole
// 256-element super-blocks, so no tensor falls back to Q5_0/Q8_0), against transformers on the
// same weights dequantized by gguf-py: teacher-forced top-1 at >= 99% of the long prompt's
// positions, logits within kKQuantTolerance, and the same through the KV cache one token at a
// time. The file must hold the types the manifest lists (the K kernels really run).
struct KQuantCase {
  std::string family, type;  // type: "q4_k_m", "q5_k_m"
};
void PrintTo(const KQuantCase& c, std::ostream* os) { *os << c.family << " " << c.type; }

std::vector<KQuantCase> k_quant_cases() {
  std::vector<KQuantCase> cases;
  for (const std::string& family : family_names())
    if (families_manifest()[family].contains("k_quants"))
      for (auto it = families_manifest()[family]["k_quants"]["files"].begin(); it != families_manifest()[family]["k_quants"]["files"].end(); ++it)
        cases.push_back({family, it.key()});
  return cases;
}

// Measured on lavapipe: at most 2.2e-6 x max|logit| over all positions, full forward and KV
// cache alike (only the order of f32 arithmetic differs, as for f32 and Q8_0, whose bound this
// is); 1e-4 leaves room for other devices' accumulation orders, while a misread super-block
// header is far outside it (Q4_K's first four sub-blocks with scale and min swapped: 1.15, top-1
// 0 of 40).
constexpr double kKQuantTolerance = 1e-4;

class KQuants : public ::testing::TestWithParam<KQuantCase> {
 protected:
  const json& files() const { return families_manifest()[GetParam().family]["k_quants"]["files"][GetParam().type]; }
  fs::path gguf() const { return family_file(files()["gguf"]); }
  // The k-quants' prompt, and transformers' logits for it on the weights dequantized.
  Golden golden() const {
    const json& family = families_manifest()[GetParam().family];
    return {family["prompts"][family["k_quants"]["prompt"].get<std::string>()]["ids"].get<std::vector<int32_t>>(),
            read_npy(family_file(files()["logits"])).to_f32()};
  }
  LanguageModel load() const {
    LanguageModelOptions o;
    o.context = 128;
    return LanguageModel::load(test_device(), gguf(), o);
  }
  std::string label() const { return GetParam().family + " " + GetParam().type; }
};

int64_t top1_agreement(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  int64_t agree = 0;
  for (size_t i = 0; i + vocab <= std::min(got.size(), want.size()); i += vocab)
    agree += argmax(got.data() + i, vocab) == argmax(want.data() + i, vocab);
  return agree;
}

TEST_P(KQuants, TheFileHoldsTheListedKQuantTypes) {
  const GgufFile file(gguf());
  std::map<std::string, int> counts;
  for (const auto& [name, type] : files()["tensor_types"].items()) {
    const GgufTensorInfo* t = file.find_tensor(name);
    ASSERT_NE(t, nullptr) << label() << ": " << name;
    EXPECT_EQ(ggml_type_name(t->type), type.get<std::string>()) << label() << ": " << name;
    ++counts[type.get<std::string>()];
  }
  EXPECT_EQ(file.tensors().size(), files()["tensor_types"].size()) << label();
  EXPECT_GT(counts[GetParam().type == "q4_k_m" ? "Q4_K" : "Q5_K"], 0) << label();
  EXPECT_GT(counts["Q6_K"], 0) << label();
  std::string mix;
  for (const auto& [type, n] : counts) mix += " " + type + " x" + std::to_string(n);
  std::printf("%s:%s\n", label().c_str(), mix.c_str());
}

TEST_P(KQuants, MatchTheDequantizedWeightsTeacherForced) {
  LanguageModel lm = load();
  const auto [ids, want] = golden();
  const int64_t vocab = lm.config().vocab_size, n = static_cast<int64_t>(ids.size());
  const std::vector<float> got = lm.append_all_logits(ids);
  const double e = relative_error(got, want);
  EXPECT_LE(e, kKQuantTolerance) << label();
  const int64_t agree = top1_agreement(got, want, vocab);
  EXPECT_GE(agree * 100, n * 99) << label() << ": top-1 agrees at " << agree << " of " << n << " positions";
  std::printf("%s: %.2e against the dequantized weights, top-1 %lld/%lld\n", label().c_str(), e,
              static_cast<long long>(agree), static_cast<long long>(n));
}

TEST_P(KQuants, KvCachedDecodeMatchesTheFullForward) {
  LanguageModel lm = load();
  const auto [ids, want] = golden();
  const int64_t vocab = lm.config().vocab_size, n = static_cast<int64_t>(ids.size());
  const std::vector<float> full = lm.append_all_logits(ids);
  lm.reset();
  const std::vector<float> got = prompt_then_decode(lm, ids, 5);
  ASSERT_EQ(static_cast<int64_t>(got.size()), n * vocab);
  const double e_full = relative_error(got, full), e = relative_error(got, want);
  EXPECT_LE(e_full, kKQuantTolerance) << label();
  EXPECT_LE(e, kKQuantTolerance) << label();
  EXPECT_GE(top1_agreement(got, want, vocab) * 100, n * 99) << label();
  std::printf("%s one token at a time: %.2e against the full forward, %.2e against the dequantized weights\n",
              label().c_str(), e_full, e);
}

INSTANTIATE_TEST_SUITE_P(LlamaQuantize, KQuants, ::testing::ValuesIn(k_quant_cases()),
                         [](const ::testing::TestParamInfo<KQuantCase>& i) { return i.param.family + "_" + i.param.type; });

// What a family's file asks for that vkformer lacks is refused naming the key or tensor and the
// file, never computed as something else: YaRN scaling (gemma3's "linear" made another type),
// a tensor the family does not use (phi3's fused attn_qkv renamed).
fs::path patched_copy(const std::string& family, const std::string& from, const std::string& to) {
  const fs::path src = family_gguf(family);
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  const fs::path out = scratch_dir("llm_families_test") / (family + ".gguf");  // pid-suffixed, removed at exit
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

// The families of src/models/llm/families.def, as the error for another architecture lists them
// ("llama, qwen2, ...").
std::string families_listed() {
  std::string s;
#define VKF_FAMILY(architecture, variable) s += (s.empty() ? "" : ", ") + std::string(#architecture);
#include "llm/families.def"
#undef VKF_FAMILY
  return s;
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
  EXPECT_NE(yarn.find((scratch_dir("llm_families_test") / "gemma3.gguf").string()), std::string::npos)
      << yarn;  // the error names the file
  const std::string tensor = load_error(patched_copy("phi3", "blk.1.attn_qkv.weight", "blk.1.attn_qkx.weight"));
  EXPECT_NE(tensor.find("tensor blk.1.attn_qkv.weight is missing"), std::string::npos) << tensor;
  const std::string arch = load_error(patched_copy("qwen2", std::string("\x05\0\0\0\0\0\0\0qwen2", 13),
                                                   std::string("\x05\0\0\0\0\0\0\0qwen9", 13)));
  EXPECT_NE(arch.find("general.architecture is 'qwen9'; supported: " + families_listed()),
            std::string::npos)
      << arch;
}

INSTANTIATE_TEST_SUITE_P(Golden, Families, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace vkformer::testing
