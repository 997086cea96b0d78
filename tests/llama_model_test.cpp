// LanguageModel (vkformer/llm.hpp) with llama GGUF files:
//   - tiny random-weight llamas (tests/golden_llama/tiny, tests/fixtures/make_tiny_llama.py: Q4_0, Q4_1,
//     Q8_0, BF16, F16, F32 weights, tied and untied output; and one of Q4_K_M's types Q4_K,
//     Q6_K and Q5_0) against the fp64 PyTorch logits stored there, and against a
//     double-precision llama written here that reads the same file through GgufFile::read_f32
//     (ggml's dequantization): every position's logits, across prompt chunks, one token at a
//     time, in pieces, after truncate/reset, f32 and f16;
//   - bad input: files of another architecture or missing a tensor, prompts longer than the
//     context, ids outside the vocabulary;
//   - SmolLM2-135M-Instruct Q4_1 ($VKFORMER_SMOLLM2_GGUF, or scripts/fetch_smollm2.sh) against
//     tests/golden_llama (tests/fixtures/make_llama_golden.py, a float64 PyTorch llama): logits within
//     1e-2 × max|logit| per position, teacher-forced top-1 agreement >= 99% over 369 tokens, and
//     the 32-token greedy continuations of three prompts, fed the golden ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "test_device.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/io.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTinyDir = fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny";
// tests/fixtures/make_tiny_llama.py's files: "tied" (Q8_0 table as the output) and "untied" (Q4_0
// table, Q4_1 output.weight); projections of every block in mixed types.
fs::path tiny_model(const std::string& variant = "tied") {
  return kTinyDir / ("tiny_llama_" + variant + ".gguf");
}

// ------------------------------------------------------------------ double-precision llama
// Straight from the definition (Llama / llama.cpp): RMSNorm, GGUF's interleaved RoPE (pairs
// 2i, 2i+1), grouped-query causal attention, SwiGLU, tied output when output.weight is absent.
class ReferenceLlama {
 public:
  explicit ReferenceLlama(const fs::path& path) : file_(path) {
    layers_ = file_.get_int("llama.block_count");
    d_ = file_.get_int("llama.embedding_length");
    heads_ = file_.get_int("llama.attention.head_count");
    kv_heads_ = file_.has("llama.attention.head_count_kv") ? file_.get_int("llama.attention.head_count_kv")
                                                           : heads_;
    hd_ = d_ / heads_;
    ff_ = file_.get_int("llama.feed_forward_length");
    eps_ = file_.get_float("llama.attention.layer_norm_rms_epsilon");
    base_ = file_.get_float_or("llama.rope.freq_base", 10000.0);
    vocab_ = static_cast<int64_t>(file_.tensor("token_embd.weight").ne[1]);
  }
  int64_t vocab() const { return vocab_; }

  // Logits [n × vocab] of every position of `ids` (positions 0..n-1).
  std::vector<double> logits(const std::vector<int32_t>& ids) {
    const int64_t n = static_cast<int64_t>(ids.size());
    const std::vector<double> embd = weight("token_embd.weight");
    std::vector<double> x(static_cast<size_t>(n * d_));
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(embd.begin() + ids[t] * d_, d_, x.begin() + t * d_);
    for (int64_t l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<double> h = rms_norm(x, weight(p + "attn_norm.weight"));
      std::vector<double> q = matmul(h, weight(p + "attn_q.weight"), heads_ * hd_);
      std::vector<double> k = matmul(h, weight(p + "attn_k.weight"), kv_heads_ * hd_);
      std::vector<double> v = matmul(h, weight(p + "attn_v.weight"), kv_heads_ * hd_);
      rope(q, heads_);
      rope(k, kv_heads_);
      std::vector<double> a(static_cast<size_t>(n * heads_ * hd_), 0.0);
      const int64_t group = heads_ / kv_heads_;
      for (int64_t hq = 0; hq < heads_; ++hq) {
        const int64_t hk = hq / group;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> s(static_cast<size_t>(i + 1));
          double m = -INFINITY;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < hd_; ++c)
              dot += q[(i * heads_ + hq) * hd_ + c] * k[(j * kv_heads_ + hk) * hd_ + c];
            s[j] = dot / std::sqrt(static_cast<double>(hd_));
            m = std::max(m, s[j]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - m));
          for (int64_t j = 0; j <= i; ++j)
            for (int64_t c = 0; c < hd_; ++c)
              a[(i * heads_ + hq) * hd_ + c] += s[j] / sum * v[(j * kv_heads_ + hk) * hd_ + c];
        }
      }
      add(x, matmul(a, weight(p + "attn_output.weight"), d_));
      h = rms_norm(x, weight(p + "ffn_norm.weight"));
      std::vector<double> g = matmul(h, weight(p + "ffn_gate.weight"), ff_);
      std::vector<double> u = matmul(h, weight(p + "ffn_up.weight"), ff_);
      for (size_t e = 0; e < g.size(); ++e) g[e] = g[e] / (1 + std::exp(-g[e])) * u[e];
      add(x, matmul(g, weight(p + "ffn_down.weight"), d_));
    }
    const std::string out = file_.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
    return matmul(rms_norm(x, weight("output_norm.weight")), weight(out), vocab_);
  }

 private:
  std::vector<double> weight(const std::string& name) const {
    std::vector<float> f = file_.read_f32(name).to_f32();
    return {f.begin(), f.end()};
  }
  // x [n, K] · wᵀ with w [N, K].
  static std::vector<double> matmul(const std::vector<double>& x, const std::vector<double>& w, int64_t n_out) {
    const int64_t k = static_cast<int64_t>(w.size()) / n_out, rows = static_cast<int64_t>(x.size()) / k;
    std::vector<double> y(static_cast<size_t>(rows * n_out));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < n_out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i) s += x[r * k + i] * w[o * k + i];
        y[r * n_out + o] = s;
      }
    return y;
  }
  std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w) const {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / d_; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < d_; ++c) ss += x[r * d_ + c] * x[r * d_ + c];
      const double inv = 1 / std::sqrt(ss / static_cast<double>(d_) + eps_);
      for (int64_t c = 0; c < d_; ++c) y[r * d_ + c] = x[r * d_ + c] * inv * w[c];
    }
    return y;
  }
  void rope(std::vector<double>& x, int64_t heads) const {
    const int64_t n = static_cast<int64_t>(x.size()) / (heads * hd_);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hd_ / 2; ++i) {
          const double theta = static_cast<double>(t) * std::pow(base_, -2.0 * i / static_cast<double>(hd_));
          double& a = x[(t * heads + h) * hd_ + 2 * i];
          double& b = x[(t * heads + h) * hd_ + 2 * i + 1];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(theta) - b0 * std::sin(theta);
          b = a0 * std::sin(theta) + b0 * std::cos(theta);
        }
  }
  static void add(std::vector<double>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }

  GgufFile file_;
  int64_t layers_, d_, heads_, kv_heads_, hd_, ff_, vocab_;
  double eps_, base_;
};

std::vector<int32_t> some_ids(size_t n, int64_t vocab, uint32_t seed) {
  std::vector<float> r = random_values(n, seed, 0.0f, static_cast<float>(vocab));
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = std::min(static_cast<int32_t>(r[i]), static_cast<int32_t>(vocab - 1));
  return ids;
}

// Per position: max |got - want| over the vocabulary <= rel × max |want|; returns the worst
// ratio of error to that position's max |logit|.
double worst_relative_error(const std::vector<float>& got, const std::vector<double>& want, int64_t vocab,
                            int64_t first_row = 0) {
  EXPECT_EQ(got.size() % static_cast<size_t>(vocab), 0u);
  double worst = 0;
  for (size_t r = 0; r < got.size() / static_cast<size_t>(vocab); ++r) {
    double err = 0, scale = 0;
    for (int64_t c = 0; c < vocab; ++c) {
      const double w = want[(first_row + r) * vocab + c];
      err = std::max(err, std::abs(got[r * vocab + c] - w));
      scale = std::max(scale, std::abs(w));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

std::vector<float> row(const std::vector<float>& all, int64_t r, int64_t vocab) {
  return {all.begin() + r * vocab, all.begin() + (r + 1) * vocab};
}

class TinyLlama : public DeviceTest {
 protected:
  static ReferenceLlama& reference() {
    static ReferenceLlama ref(tiny_model());
    return ref;
  }
};

// Every stored sequence of both files, all logits at once and then one token at a time.
TEST_F(TinyLlama, LogitsMatchThePyTorchReference) {
  static const json golden = json::parse(std::ifstream(kTinyDir / "golden.json"));
  for (const char* variant : {"tied", "untied"}) {
    LanguageModel lm = LanguageModel::load(device(), tiny_model(variant));
    const int64_t vocab = lm.config().vocab_size;
    EXPECT_EQ(lm.config().tied_output, std::string(variant) == "tied");
    for (const auto& [name, seq] : golden["models"][variant]["sequences"].items()) {
      const std::vector<int32_t> ids = seq["ids"].get<std::vector<int32_t>>();
      std::vector<float> f = read_npy(kTinyDir / seq["logits_file"].get<std::string>()).to_f32();
      const std::vector<double> want(f.begin(), f.end());
      lm.reset();
      const double all = worst_relative_error(lm.append_all_logits(ids), want, vocab);
      EXPECT_LE(all, 1e-4) << variant << " " << name;
      lm.reset();
      double one = 0;
      for (size_t t = 0; t < ids.size(); ++t)
        one = std::max(one, worst_relative_error(lm.append(std::span(ids).subspan(t, 1)), want, vocab,
                                                 static_cast<int64_t>(t)));
      EXPECT_LE(one, 1e-4) << variant << " " << name << ", one token at a time";
      std::printf("tiny %s %s (%zu ids): max |dlogit| / max|logit| %.2e at once, %.2e one at a time\n",
                  variant, name.c_str(), ids.size(), all, one);
    }
  }
}

// Q4_K_M's weight types (Q4_K, Q6_K and Q5_0 in every role, a Q6_K table that is also the
// output) at k-quant widths (tests/fixtures/make_tiny_llama.py --kquant): 80 tokens in one pass (two
// prompt chunks), then the first 8 again one at a time (the decode graph), every position's
// logits against the double reference on the same dequantized weights.
TEST_F(TinyLlama, KQuantWeightsMatchTheDoubleReference) {
  const fs::path path = kTinyDir / "tiny_llama_kquant.gguf";
  ReferenceLlama ref(path);
  for (DType act : {DType::f32, DType::f16}) {
    LanguageModelOptions o;
    o.activations = act;
    LanguageModel lm = LanguageModel::load(device(), path, o);
    const int64_t vocab = lm.config().vocab_size;
    ASSERT_EQ(lm.config().d_model, 256);
    const std::vector<int32_t> ids = some_ids(80, vocab, 11);
    const std::vector<double> want = ref.logits(ids);
    const double tol = act == DType::f32 ? 1e-4 : 1e-2;
    const double all = worst_relative_error(lm.append_all_logits(ids), want, vocab);
    EXPECT_LE(all, tol) << dtype_name(act);
    lm.reset();
    double one = 0;
    for (size_t t = 0; t < 8; ++t)
      one = std::max(one, worst_relative_error(lm.append(std::span(ids).subspan(t, 1)), want, vocab,
                                               static_cast<int64_t>(t)));
    EXPECT_LE(one, tol) << dtype_name(act) << ", one token at a time";
    std::printf("tiny kquant %s: max |dlogit| / max|logit| %.2e at once, %.2e one at a time\n",
                std::string(dtype_name(act)).c_str(), all, one);
  }
}

// 120 tokens: chunks of the prompt graph (one full, one padded), every position's logits.
TEST_F(TinyLlama, AllLogitsMatchTheDoubleReference) {
  for (DType act : {DType::f32, DType::f16}) {
    LanguageModelOptions o;
    o.activations = act;
    LanguageModel lm = LanguageModel::load(device(), tiny_model(), o);
    const int64_t vocab = lm.config().vocab_size;
    std::vector<int32_t> ids = some_ids(120, vocab, 7);
    std::vector<double> want = reference().logits(ids);
    std::vector<float> got = lm.append_all_logits(ids);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(lm.position(), 120);
    const double err = worst_relative_error(got, want, vocab);
    EXPECT_LE(err, act == DType::f32 ? 1e-4 : 1e-2) << dtype_name(act);
    RecordProperty(std::string("max_rel_err_") + std::string(dtype_name(act)), sci(err));
  }
}

// The fused attention paths of GPUs inside the model: with emulated cooperative matrices, f16
// activations take flash attention for the prompt chunks (causal mask over the cache,
// key_length, 4 query heads on 2 KV heads read in place), as the automatic path chooses it; and
// with split-K decoding asked for (GPUs take it by themselves; two key ranges here) and the
// unfused chain's preference for single queries turned off, single tokens take split-K
// decoding. Both against the double reference as the other paths are. (The matmuls keep
// lavapipe's texel kernel: emulated cooperative-matrix matmuls would only add compile time.)
TEST_F(TinyLlama, FlashAttentionPathsMatchTheDoubleReference) {
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"},
                                          {"VKFORMER_MATMUL_PATH", "texel"},
                                          {"VKFORMER_ATTENTION_DECODE", "128x32/2"},
                                          {"VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES", "0"},
                                          {"VKFORMER_ATTENTION_FLASH", ""},
                                          {"VKFORMER_ATTENTION_TILES", ""}});
  LanguageModelOptions o;
  o.activations = DType::f16;
  LanguageModel lm = LanguageModel::load(dev, tiny_model(), o);
  const int64_t vocab = lm.config().vocab_size;
  const std::vector<int32_t> ids = some_ids(100, vocab, 9);
  const std::vector<double> want = reference().logits(ids);
  const double all = worst_relative_error(lm.append_all_logits(ids), want, vocab);
  EXPECT_LE(all, 1e-2);
  lm.reset();
  double one = 0;
  for (size_t t = 0; t < 6; ++t)
    one = std::max(one, worst_relative_error(lm.append(std::span(ids).subspan(t, 1)), want, vocab,
                                             static_cast<int64_t>(t)));
  EXPECT_LE(one, 1e-2) << "one token at a time";
  std::set<std::string> kernels;
  for (const auto& p : dev.impl().pipelines().created()) kernels.insert(p.variant);
  EXPECT_TRUE(kernels.count("attention_flash_emu_f16")) << "the prompt chunks take flash attention";
  // A decoding step's rope_kv_cache is done inside the attention (its ROPE_KV variant).
  EXPECT_TRUE(kernels.count("attention_flash_decode_split_rope_f16") &&
              kernels.count("attention_flash_combine_f16"))
      << "single tokens take split-K decoding";
  for (const auto& m : dev.take_validation_messages())
    ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
  std::printf("tiny f16 flash: max |dlogit| / max|logit| %.2e at once, %.2e one at a time\n", all, one);
}

// The decode graph (one token per pass) and prompt chunks of every length agree with the
// reference, and append returns the last position's logits.
TEST_F(TinyLlama, PiecesOfAnyLengthEqualTheWholeSequence) {
  LanguageModel lm = LanguageModel::load(device(), tiny_model());
  const int64_t vocab = lm.config().vocab_size;
  std::vector<int32_t> ids = some_ids(128, vocab, 11);
  std::vector<double> want = reference().logits(ids);
  size_t at = 0;
  for (size_t piece : {1, 2, 1, 63, 40, 5, 1, 1}) {
    std::vector<int32_t> part(ids.begin() + at, ids.begin() + at + piece);
    at += piece;
    std::vector<float> got = lm.append(part);
    ASSERT_EQ(got.size(), static_cast<size_t>(vocab));
    EXPECT_EQ(lm.position(), static_cast<int64_t>(at));
    EXPECT_LE(worst_relative_error(got, want, vocab, static_cast<int64_t>(at) - 1), 1e-4) << "after " << at;
  }
  ASSERT_LT(at, ids.size());
  // One token at a time for the rest, with all logits.
  for (; at < ids.size(); ++at) {
    std::vector<float> got = lm.append_all_logits(std::span(ids).subspan(at, 1));
    EXPECT_LE(worst_relative_error(got, want, vocab, static_cast<int64_t>(at)), 1e-4) << "at " << at;
  }
}

// truncate(n) forgets the later tokens: new tokens after it see only the first n.
TEST_F(TinyLlama, TruncateAndResetForgetLaterTokens) {
  LanguageModel lm = LanguageModel::load(device(), tiny_model());
  const int64_t vocab = lm.config().vocab_size;
  std::vector<int32_t> a = some_ids(90, vocab, 3), b = some_ids(20, vocab, 4);
  std::vector<int32_t> branch(a.begin(), a.begin() + 70);
  branch.insert(branch.end(), b.begin(), b.end());
  std::vector<double> want = reference().logits(branch);

  lm.append(a);
  lm.truncate(70);
  EXPECT_EQ(lm.position(), 70);
  std::vector<float> got = lm.append_all_logits(b);
  EXPECT_LE(worst_relative_error(got, want, vocab, 70), 1e-4);

  lm.reset();
  EXPECT_EQ(lm.position(), 0);
  std::vector<float> again = lm.append_all_logits(branch);
  EXPECT_LE(worst_relative_error(again, want, vocab), 1e-4);
  EXPECT_TRUE(fails_with([&] { lm.truncate(91); }, ErrorCode::invalid_argument, "expected 0..90"));
  EXPECT_TRUE(fails_with([&] { lm.truncate(-1); }, ErrorCode::invalid_argument, "n is -1"));
}

TEST_F(TinyLlama, ConfigComesFromTheFile) {
  LanguageModelOptions o;
  o.context = 100;
  LanguageModel lm = LanguageModel::load(device(), tiny_model(), o);
  const LanguageModelConfig& c = lm.config();
  GgufFile f(tiny_model());
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, f.get_int("llama.block_count"));
  EXPECT_EQ(c.d_model, f.get_int("llama.embedding_length"));
  EXPECT_EQ(c.n_heads, f.get_int("llama.attention.head_count"));
  EXPECT_EQ(c.n_kv_heads, f.get_int("llama.attention.head_count_kv"));
  EXPECT_EQ(c.head_dim, c.d_model / c.n_heads);
  EXPECT_EQ(c.d_ff, f.get_int("llama.feed_forward_length"));
  EXPECT_EQ(c.vocab_size, static_cast<int64_t>(f.tensor("token_embd.weight").ne[1]));
  EXPECT_EQ(c.tied_output, f.find_tensor("output.weight") == nullptr);
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(lm.context(), 100);
  EXPECT_EQ(lm.position(), 0);
  EXPECT_EQ(LanguageModel::load(device(), tiny_model()).context(), 128);  // the file's context_length
  EXPECT_EQ(lm.tokenizer().vocab_size(), static_cast<size_t>(c.vocab_size));
}

TEST_F(TinyLlama, PromptsLongerThanTheContextAndBadIdsAreRefused) {
  LanguageModelOptions o;
  o.context = 100;
  LanguageModel lm = LanguageModel::load(device(), tiny_model(), o);
  const int64_t vocab = lm.config().vocab_size;
  std::vector<int32_t> ids = some_ids(101, vocab, 5);
  EXPECT_TRUE(fails_with([&] { lm.append(ids); }, ErrorCode::invalid_argument,
                         "101 tokens do not fit in the 100 positions left"));
  EXPECT_EQ(lm.position(), 0);
  lm.append(std::span(ids).first(60));
  EXPECT_TRUE(fails_with([&] { lm.append(std::span(ids).first(41)); }, ErrorCode::invalid_argument,
                         "41 tokens do not fit in the 40 positions left"));
  std::vector<int32_t> bad = {1, static_cast<int32_t>(vocab), 2};
  EXPECT_TRUE(fails_with([&] { lm.append(bad); }, ErrorCode::invalid_argument,
                         "token " + std::to_string(vocab) + " at index 1 is outside the vocabulary"));
  bad[1] = -3;
  EXPECT_TRUE(fails_with([&] { lm.append_all_logits(bad); }, ErrorCode::invalid_argument, "token -3"));
  EXPECT_TRUE(fails_with([&] { lm.append({}); }, ErrorCode::invalid_argument, "no tokens"));
  EXPECT_EQ(lm.position(), 60);
  // The last 40 positions still work: a padded chunk at the end of the context.
  EXPECT_EQ(lm.append(std::span(ids).subspan(60, 40)).size(), static_cast<size_t>(vocab));
  EXPECT_EQ(lm.position(), 100);

  o.context = 129;
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), tiny_model(), o); }, ErrorCode::invalid_argument,
                         "context is 129, expected 0 (128 for this model) to the model's context_length 128"));
}

// A copy of the tiny file with `from` replaced by `to` (same length) once.
fs::path patched_copy(const std::string& from, const std::string& to, const std::string& name) {
  std::ifstream in(tiny_model(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  bytes.replace(at, from.size(), to);
  fs::path out = scratch_dir("llama_model_test") / name;
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

TEST_F(TinyLlama, FilesOfOtherArchitecturesMissingTensorsOrOtherTypesAreRefusedByName) {
  // general.architecture's value: a u64 length, then the bytes.
  const std::string llama("\x05\0\0\0\0\0\0\0llama", 13), mamba("\x05\0\0\0\0\0\0\0mamba", 13);
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), patched_copy(llama, mamba, "arch.gguf")); },
                         ErrorCode::format, "general.architecture is 'mamba'; supported: llama"));
  EXPECT_TRUE(fails_with(
      [&] { LanguageModel::load(device(), patched_copy("blk.1.ffn_up.weight", "blk.1.ffn_up.weighx", "t.gguf")); },
      ErrorCode::format, "tensor blk.1.ffn_up.weight is missing"));
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), scratch_dir("llama_model_test") / "absent.gguf"); },
                         ErrorCode::io, "absent.gguf"));
  // blk.1.ffn_up.weight's info: name, 2 dims (64, 96), then its type F32 (0) made I32 (26), the
  // same element size, so the file stays consistent and only the model refuses it.
  const std::string dims("\x02\0\0\0" "\x40\0\0\0\0\0\0\0" "\x60\0\0\0\0\0\0\0", 20);
  const std::string f32_info = "blk.1.ffn_up.weight" + dims + std::string("\0\0\0\0", 4);
  const std::string i32_info = "blk.1.ffn_up.weight" + dims + std::string("\x1a\0\0\0", 4);
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), patched_copy(f32_info, i32_info, "type.gguf")); },
                         ErrorCode::format,
                         "tensor blk.1.ffn_up.weight has type I32; weight matrices must be " +
                             std::string(ggml_weight_type_names())));
  LanguageModelOptions o;
  o.activations = DType::i32;
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), tiny_model(), o); }, ErrorCode::invalid_argument,
                         "activations must be f32 or f16"));
}

// ------------------------------------------------------------------------------ SmolLM2

const json& golden() {
  static const json m = json::parse(std::ifstream(fs::path(VKF_LLAMA_GOLDEN_DIR) / "manifest.json"));
  return m;
}

// One model per activation type for the whole suite: loading and compiling take seconds.
LanguageModel& smollm2_model(DType activations) {
  static std::map<DType, LanguageModel> models;
  auto it = models.find(activations);
  if (it == models.end()) {
    LanguageModelOptions o;
    o.context = 512;
    o.activations = activations;
    it = models.emplace(activations, LanguageModel::load(test_device(), smollm2_gguf().path, o)).first;
  }
  return it->second;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<double> golden_rows(const std::string& file) {
  std::vector<float> f = read_npy(fs::path(VKF_LLAMA_GOLDEN_DIR) / file).to_f32();
  return {f.begin(), f.end()};
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class SmolLM2 : public DeviceTest {
 protected:
  void SetUp() override { ASSERT_TRUE(smollm2_gguf().error.empty()) << smollm2_gguf().error; }

  // The long text teacher-forced: logits at the stored positions within 1e-2 × max|logit|,
  // the argmax at every position against the reference's (differences only at near ties).
  void teacher_forced(DType activations) {
    LanguageModel& lm = smollm2_model(activations);
    lm.reset();
    const json& c = golden()["cases"]["long"];
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    const int64_t vocab = lm.config().vocab_size;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> got = lm.append_all_logits(ids);
    const double secs = seconds_since(t0);
    ASSERT_EQ(got.size(), ids.size() * static_cast<size_t>(vocab));

    const std::string file = c["logits_file"];
    const std::vector<double> want = golden_rows(file);
    const std::vector<int64_t> positions = golden()["files"][file]["positions"].get<std::vector<int64_t>>();
    double worst = 0;
    for (size_t i = 0; i < positions.size(); ++i) {
      const double err = worst_relative_error(row(got, positions[i], vocab), want, vocab, static_cast<int64_t>(i));
      EXPECT_LE(err, 1e-2) << "position " << positions[i];
      worst = std::max(worst, err);
    }
    const json& tf = c["teacher_forced"];
    const std::vector<int32_t> expected = tf["argmax"].get<std::vector<int32_t>>();
    ASSERT_EQ(expected.size(), ids.size());
    size_t agree = 0;
    std::string differ;
    for (size_t t = 0; t < ids.size(); ++t) {
      const int32_t top = argmax(std::span(got).subspan(t * vocab, vocab));
      if (top == expected[t]) {
        ++agree;
      } else {
        const double margin = tf["top2_margin"][t].get<double>();
        differ += " " + std::to_string(t) + " (margin " + std::to_string(margin) + ")";
        EXPECT_LT(margin, 0.05) << "position " << t << ": a clear top-1 differs";
      }
    }
    EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(ids.size())) << differ;
    std::printf("SmolLM2 %s teacher-forced: %zu tokens in %.2f s (%.1f tokens/s), max |dlogit| / "
                "max|logit| = %.2e, top-1 agreement %zu/%zu%s%s\n",
                std::string(dtype_name(activations)).c_str(), ids.size(), secs,
                static_cast<double>(ids.size()) / secs, worst, agree, ids.size(),
                differ.empty() ? "" : ", differing at", differ.c_str());
    RecordProperty("max_rel_err", sci(worst));
    RecordProperty("top1_agreement", std::to_string(agree) + "/" + std::to_string(ids.size()));
  }
};

TEST_F(SmolLM2, TeacherForcedLogitsAndArgmaxMatchTheReference) { teacher_forced(DType::f32); }
TEST_F(SmolLM2, TeacherForcedWithF16Activations) { teacher_forced(DType::f16); }

// Every position of the plain prompt at once.
TEST_F(SmolLM2, PromptLogitsMatchTheReference) {
  LanguageModel& lm = smollm2_model(DType::f32);
  lm.reset();
  const json& c = golden()["cases"]["plain"];
  const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
  const int64_t vocab = lm.config().vocab_size;
  std::vector<float> got = lm.append_all_logits(ids);
  const double err = worst_relative_error(got, golden_rows(c["logits_file"]), vocab);
  EXPECT_LE(err, 1e-2);
  std::printf("SmolLM2 plain: every position within %.2e of max|logit|\n", err);
}

// Each prompt, then its golden continuation fed back one token at a time: the argmax after
// every token is the reference's next greedy token, and the logits of its top 5 match.
TEST_F(SmolLM2, GreedyContinuationsMatchTheReference) {
  LanguageModel& lm = smollm2_model(DType::f32);
  const int64_t vocab = lm.config().vocab_size;
  int prompts = 0;
  for (const auto& [name, c] : golden()["cases"].items()) {
    if (!c.contains("greedy")) continue;
    ++prompts;
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    const json& greedy = c["greedy"];
    const std::vector<int32_t> want_ids = greedy["ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(want_ids.size(), 32u);
    lm.reset();
    std::vector<float> logits = lm.append(ids);
    // The prompt's last logits against the stored row.
    const std::vector<double> want = golden_rows(c["logits_file"]);
    EXPECT_LE(worst_relative_error(logits, want, vocab, static_cast<int64_t>(want.size()) / vocab - 1), 1e-2)
        << name;

    auto t0 = std::chrono::steady_clock::now();
    size_t same = 0;
    double worst_top5 = 0;
    for (size_t t = 0; t < want_ids.size(); ++t) {
      const int32_t top = argmax(logits);
      EXPECT_EQ(top, want_ids[t]) << name << ": token " << t << " (reference margin "
                                  << greedy["top2_margin"][t].get<double>() << ")";
      same += top == want_ids[t];
      const double scale = std::abs(greedy["top5_logits"][t][0].get<double>());
      for (size_t k = 0; k < 5; ++k) {
        const double diff = std::abs(logits[greedy["top5_ids"][t][k].get<size_t>()] -
                                     greedy["top5_logits"][t][k].get<double>());
        worst_top5 = std::max(worst_top5, diff / scale);
      }
      if (t + 1 < want_ids.size()) logits = lm.append(std::span(want_ids).subspan(t, 1));
    }
    EXPECT_LE(worst_top5, 1e-2) << name;
    const double secs = seconds_since(t0);
    std::printf("SmolLM2 %s: %zu-token prompt, %zu/32 greedy tokens equal, top-5 logits within %.2e; "
                "31 decode steps in %.2f s (%.1f tokens/s)\n",
                name.c_str(), ids.size(), same, worst_top5, secs, 31 / secs);
  }
  EXPECT_GE(prompts, 3);
}

}  // namespace
}  // namespace vkformer::testing
