// BERT-family sentence embeddings (SentenceEmbedder):
//   - all-MiniLM-L6-v2 (scripts/fetch_minilm.sh, or $VKFORMER_MINILM_DIR) against
//     sentence-transformers' embeddings in tests/golden_embeddings (tests/fixtures/make_embedding_golden.py):
//     f32 min cosine >= 0.99999 and max |diff| <= 1e-5, f16 weights min cosine >= 0.999;
//   - padding invariance: a text alone and inside a padded batch, to 1e-6;
//   - tiny random BERT directories written here, against a double-precision BERT written here
//     (every hidden_act and pooling mode, with and without the "bert." prefix), the shape-bucket
//     executor cache (no compilation once a mix of lengths 1..max is warm), and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "special_files.hpp"
#include "test_device.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/embedder.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ------------------------------------------------------------------------------ the real model
using ModelDir = vkformer::testing::FetchedModel;

struct Golden {
  std::vector<std::string> texts;
  std::vector<int> tokens;
  HostTensor embeddings;  // [N, 384]
};

const Golden& golden() {
  static const Golden g = [] {
    Golden out;
    std::ifstream in(std::string(VKF_GOLDEN_DIR) + "/texts.json");
    json j = json::parse(in);
    out.texts = j["texts"].get<std::vector<std::string>>();
    out.tokens = j["tokens"].get<std::vector<int>>();
    out.embeddings = read_npy(std::string(VKF_GOLDEN_DIR) + "/embeddings_f32.npy");
    return out;
  }();
  return g;
}

struct Agreement {
  double min_cosine = 1, max_abs = 0;
  size_t worst = 0;  // the row with the smallest cosine
};

Agreement compare(const HostTensor& got, const HostTensor& want) {
  Agreement a;
  const int64_t n = want.shape()[0], d = want.shape()[1];
  auto g = got.to_f32(), w = want.to_f32();
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0, gg = 0, ww = 0;
    for (int64_t j = 0; j < d; ++j) {
      double x = g[i * d + j], y = w[i * d + j];
      dot += x * y, gg += x * x, ww += y * y;
      a.max_abs = std::max(a.max_abs, std::abs(x - y));
    }
    double cos = dot / std::sqrt(gg * ww);
    if (cos < a.min_cosine) a.min_cosine = cos, a.worst = static_cast<size_t>(i);
  }
  return a;
}

#define REQUIRE_MINILM()                                      \
  const ModelDir& minilm = minilm_dir();                      \
  ASSERT_TRUE(minilm.error.empty()) << minilm.error;

class MiniLm : public DeviceTest {};

TEST_F(MiniLm, F32MatchesSentenceTransformers) {
  REQUIRE_MINILM();
  const Golden& gold = golden();
  ASSERT_GE(gold.texts.size(), 32u);
  auto model = SentenceEmbedder::load(device(), minilm.path);
  EXPECT_EQ(model.dimension(), 384);
  EXPECT_EQ(model.max_seq_length(), 256);
  EXPECT_TRUE(model.normalizes());
  EXPECT_EQ(model.pooling(), PoolMode::mean);
  HostTensor got = model.embed(gold.texts);  // every length at once: 2 to 256 tokens
  ASSERT_EQ(got.shape(), gold.embeddings.shape());
  Agreement a = compare(got, gold.embeddings);
  std::printf("all-MiniLM-L6-v2 f32, %zu texts: min cosine 1 - %.3g (text %zu), max |diff| %.3g\n",
              gold.texts.size(), 1 - a.min_cosine, a.worst, a.max_abs);
  RecordProperty("min_cosine", sci(1 - a.min_cosine) + " below 1");
  RecordProperty("max_abs_diff", sci(a.max_abs));
  EXPECT_GE(a.min_cosine, 0.99999) << "text " << a.worst;
  EXPECT_LE(a.max_abs, 1e-5);
}

// f16 weights and activations: the f16 kernels' numerics, not every length again (f32 above
// runs all 37 texts, 8 of them padded to 256 tokens). Every third text of up to 32 tokens in one
// call, and the 140- and a 256-token text in another, so the long run pads 2 rows to 256, not 8.
TEST_F(MiniLm, F16WeightsMatchSentenceTransformers) {
  REQUIRE_MINILM();
  const Golden& gold = golden();
  auto model = SentenceEmbedder::load(device(), minilm.path, {.dtype = DType::f16});
  EXPECT_EQ(model.dtype(), DType::f16);
  const int64_t d = gold.embeddings.shape()[1];
  const std::vector<float> all = gold.embeddings.to_f32();
  std::vector<size_t> short_texts, long_texts;
  for (size_t i = 0; i < gold.texts.size(); ++i) {
    if (gold.tokens[i] <= 32 && i % 3 == 0) short_texts.push_back(i);
    if (gold.tokens[i] > 128 && (long_texts.empty() || gold.tokens[long_texts.back()] != gold.tokens[i]))
      long_texts.push_back(i);
  }
  ASSERT_EQ(long_texts.size(), 2u);
  Agreement a;
  size_t n = 0;
  for (const auto* rows : {&short_texts, &long_texts}) {
    std::vector<std::string> texts;
    std::vector<float> want;
    for (size_t i : *rows) {
      texts.push_back(gold.texts[i]);
      want.insert(want.end(), all.begin() + static_cast<int64_t>(i) * d, all.begin() + static_cast<int64_t>(i + 1) * d);
    }
    const Agreement part = compare(model.embed(texts), HostTensor::from_f32({static_cast<int64_t>(texts.size()), d}, want));
    if (part.min_cosine < a.min_cosine) a.min_cosine = part.min_cosine, a.worst = (*rows)[part.worst];
    a.max_abs = std::max(a.max_abs, part.max_abs);
    n += texts.size();
  }
  std::printf("all-MiniLM-L6-v2 f16, %zu of the texts: min cosine %.6f (text %zu), max |diff| %.3g\n",
              n, a.min_cosine, a.worst, a.max_abs);
  RecordProperty("max_abs_diff", sci(a.max_abs));
  EXPECT_GE(a.min_cosine, 0.999) << "text " << a.worst;
}

// The same text alone (bucket 8 x 1) and among longer ones (padded to 64 or 256, batch 4 or 8):
// the padding may not change its embedding.
TEST_F(MiniLm, PaddingDoesNotChangeResults) {
  REQUIRE_MINILM();
  auto model = SentenceEmbedder::load(device(), minilm.path);
  const std::vector<std::string> alone = {"A man is eating food."};
  HostTensor single = model.embed(alone);
  const std::string long_text(900, 'a');
  std::vector<std::string> batch = {"The girl is carrying a baby.", alone[0],
                                    "The Transformer is a deep learning architecture based on the "
                                    "multi-head attention mechanism, proposed in 2017.",
                                    "x"};
  for (const auto& b : {batch, [&] { auto v = batch; v.push_back(std::string(300, 'b') + " " + long_text); return v; }()}) {
    HostTensor many = model.embed(b);
    auto s = single.to_f32(), m = many.to_f32();
    double diff = 0;
    for (int64_t j = 0; j < 384; ++j) diff = std::max(diff, std::abs(double(s[j]) - m[384 + j]));
    std::printf("alone vs in a padded batch of %zu: max |diff| %.3g\n", b.size(), diff);
    EXPECT_LE(diff, 1e-6);
  }
}

// ----------------------------------------------------------------- tiny random BERT directories
struct TinySpec {
  std::string hidden_act = "gelu";
  std::string pooling = "mean";  // mean, cls, max
  bool normalize = true;
  std::string prefix;             // "" or "bert."
  int64_t hidden = 16, heads = 2, inter = 24, layers = 2, positions = 64, max_seq = 40;
};

const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the",
                                         "a", "cat", "dog", "sat", "on", "mat", "##s", "run",
                                         "##ning", ",", ".", "!", "big", "small"};

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("vkformer_bert_test_" + name + "_" + std::to_string(process_id()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_text(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// Random weights by HF name (without prefix), deterministic per name.
std::map<std::string, std::pair<Shape, std::vector<float>>> tiny_weights(const TinySpec& s) {
  std::map<std::string, std::pair<Shape, std::vector<float>>> w;
  uint32_t seed = 100;
  auto add = [&](const std::string& name, Shape shape, float lo, float hi) {
    w[name] = {shape, random_values(shape.numel(), seed++, lo, hi)};
  };
  const int64_t h = s.hidden, v = static_cast<int64_t>(kVocab.size());
  add("embeddings.word_embeddings.weight", {v, h}, -1, 1);
  add("embeddings.position_embeddings.weight", {s.positions, h}, -0.5, 0.5);
  add("embeddings.token_type_embeddings.weight", {2, h}, -0.5, 0.5);
  add("embeddings.LayerNorm.weight", {h}, 0.8, 1.2);
  add("embeddings.LayerNorm.bias", {h}, -0.2, 0.2);
  for (int64_t i = 0; i < s.layers; ++i) {
    std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                          "attention.output.dense"}) {
      add(p + m + ".weight", {h, h}, -0.4, 0.4);
      add(p + m + ".bias", {h}, -0.2, 0.2);
    }
    add(p + "intermediate.dense.weight", {s.inter, h}, -0.4, 0.4);
    add(p + "intermediate.dense.bias", {s.inter}, -0.2, 0.2);
    add(p + "output.dense.weight", {h, s.inter}, -0.4, 0.4);
    add(p + "output.dense.bias", {h}, -0.2, 0.2);
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      add(p + n + ".weight", {h}, 0.8, 1.2);
      add(p + n + ".bias", {h}, -0.2, 0.2);
    }
  }
  add("pooler.dense.weight", {h, h}, -0.1, 0.1);  // present in checkpoints, unused by encoders
  return w;
}

json tiny_config(const TinySpec& s) {
  return {{"_name_or_path", "tiny"}, {"architectures", {"BertModel"}}, {"model_type", "bert"},
          {"hidden_act", s.hidden_act}, {"hidden_size", s.hidden}, {"num_attention_heads", s.heads},
          {"intermediate_size", s.inter}, {"num_hidden_layers", s.layers},
          {"max_position_embeddings", s.positions}, {"type_vocab_size", 2},
          {"vocab_size", kVocab.size()}, {"layer_norm_eps", 1e-12}, {"hidden_dropout_prob", 0.1},
          {"position_embedding_type", "absolute"}, {"transformers_version", "4.33.3"},
          {"use_cache", true}, {"pad_token_id", 0}};
}

// A sentence-transformers directory; `edit` may change the config and tensors before writing.
void write_tiny(const fs::path& dir, const TinySpec& s,
                const std::function<void(json&, std::map<std::string, std::pair<Shape, std::vector<float>>>&)>&
                    edit = {}) {
  json config = tiny_config(s);
  auto w = tiny_weights(s);
  if (edit) edit(config, w);
  write_text(dir / "config.json", config.dump(1));
  std::vector<std::pair<std::string, HostTensor>> tensors;
  for (auto& [name, t] : w) tensors.emplace_back(s.prefix + name, HostTensor::from_f32(t.first, t.second));
  write_safetensors(dir / "model.safetensors", tensors);
  std::string vocab;
  for (auto& t : kVocab) vocab += t + "\n";
  write_text(dir / "vocab.txt", vocab);
  json modules = json::array({{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
                              {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
  if (s.normalize)
    modules.push_back({{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
  write_text(dir / "modules.json", modules.dump(1));
  write_text(dir / "1_Pooling" / "config.json",
             json{{"word_embedding_dimension", s.hidden},
                  {"pooling_mode_cls_token", s.pooling == "cls"},
                  {"pooling_mode_mean_tokens", s.pooling == "mean"},
                  {"pooling_mode_max_tokens", s.pooling == "max"},
                  {"pooling_mode_mean_sqrt_len_tokens", false}}.dump(1));
  write_text(dir / "sentence_bert_config.json", json{{"max_seq_length", s.max_seq}, {"do_lower_case", false}}.dump());
}

// BertModel + Pooling + Normalize in double precision, one unpadded sequence at a time.
std::vector<double> reference_embedding(const TinySpec& s, const std::vector<int32_t>& ids) {
  auto w = tiny_weights(s);
  auto W = [&](const std::string& n) -> const std::vector<float>& { return w.at(n).second; };
  const int64_t h = s.hidden, L = static_cast<int64_t>(ids.size()), dh = h / s.heads;
  using Mat = std::vector<double>;  // [L, cols]
  auto linear = [&](const Mat& x, int64_t in, const std::string& p, int64_t out) {
    Mat y(L * out);
    for (int64_t t = 0; t < L; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double acc = W(p + ".bias")[o];
        for (int64_t i = 0; i < in; ++i) acc += x[t * in + i] * W(p + ".weight")[o * in + i];
        y[t * out + o] = acc;
      }
    return y;
  };
  auto norm = [&](Mat x, const std::string& p) {
    for (int64_t t = 0; t < L; ++t) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < h; ++i) mean += x[t * h + i] / h;
      for (int64_t i = 0; i < h; ++i) var += (x[t * h + i] - mean) * (x[t * h + i] - mean) / h;
      for (int64_t i = 0; i < h; ++i)
        x[t * h + i] = (x[t * h + i] - mean) / std::sqrt(var + 1e-12) * W(p + ".weight")[i] + W(p + ".bias")[i];
    }
    return x;
  };
  auto act = [&](double v) {
    if (s.hidden_act == "relu") return std::max(v, 0.0);
    if (s.hidden_act == "gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  };
  Mat x(L * h);
  for (int64_t t = 0; t < L; ++t)
    for (int64_t i = 0; i < h; ++i)
      x[t * h + i] = double(W("embeddings.word_embeddings.weight")[ids[t] * h + i]) +
                     W("embeddings.position_embeddings.weight")[t * h + i] +
                     W("embeddings.token_type_embeddings.weight")[i];
  x = norm(x, "embeddings.LayerNorm");
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string p = "encoder.layer." + std::to_string(l) + ".";
    Mat q = linear(x, h, p + "attention.self.query", h), k = linear(x, h, p + "attention.self.key", h),
        v = linear(x, h, p + "attention.self.value", h), ctx(L * h);
    for (int64_t hd = 0; hd < s.heads; ++hd)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(L);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          double d = 0;
          for (int64_t c = 0; c < dh; ++c) d += q[i * h + hd * dh + c] * k[j * h + hd * dh + c];
          sc[j] = d / std::sqrt(double(dh));
          mx = std::max(mx, sc[j]);
        }
        for (auto& e : sc) sum += (e = std::exp(e - mx));
        for (int64_t c = 0; c < dh; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j) acc += sc[j] / sum * v[j * h + hd * dh + c];
          ctx[i * h + hd * dh + c] = acc;
        }
      }
    Mat a = linear(ctx, h, p + "attention.output.dense", h);
    for (int64_t i = 0; i < L * h; ++i) a[i] += x[i];
    x = norm(a, p + "attention.output.LayerNorm");
    Mat mid = linear(x, h, p + "intermediate.dense", s.inter);
    for (auto& e : mid) e = act(e);
    Mat o = linear(mid, s.inter, p + "output.dense", h);
    for (int64_t i = 0; i < L * h; ++i) o[i] += x[i];
    x = norm(o, p + "output.LayerNorm");
  }
  std::vector<double> e(h, s.pooling == "max" ? -1e300 : 0.0);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t t = 0; t < (s.pooling == "cls" ? 1 : L); ++t)
      e[i] = s.pooling == "max" ? std::max(e[i], x[t * h + i]) : e[i] + x[t * h + i] / (s.pooling == "cls" ? 1 : L);
  if (s.normalize) {
    double n = 0;
    for (double v : e) n += v * v;
    for (double& v : e) v /= std::sqrt(n);
  }
  return e;
}

std::vector<int32_t> random_ids(size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(len);
  for (auto& id : ids) id = static_cast<int32_t>(5 + rng() % (kVocab.size() - 5));
  ids.front() = 2;  // [CLS]
  if (len > 1) ids.back() = 3;  // [SEP]
  return ids;
}

class TinyBert : public DeviceTestWithParam<TinySpec> {};

TEST_P(TinyBert, MatchesDoublePrecisionReference) {
  const TinySpec& spec = GetParam();
  TempDir dir("ref");
  write_tiny(dir.path, spec);
  for (DType dtype : {DType::f32, DType::f16}) {
    auto model = SentenceEmbedder::load(device(), dir.path, {.dtype = dtype, .max_batch = 4});
    std::vector<std::vector<int32_t>> seqs;
    for (size_t len : {1, 5, 17, 40, 2, 9}) seqs.push_back(random_ids(len, static_cast<uint32_t>(len)));
    HostTensor got = model.embed_ids(seqs);
    std::vector<double> want;
    for (auto& ids : seqs) {
      auto e = reference_embedding(spec, ids);
      want.insert(want.end(), e.begin(), e.end());
    }
    // f32: fp32 math over 2 layers of width 16-24 (1e-5); f16 stores every activation in f16.
    const Tolerance tol = dtype == DType::f32 ? Tolerance{2e-5, 1e-5} : Tolerance{3e-2, 3e-2};
    EXPECT_TRUE(all_close(got, want, tol)) << dtype_name(dtype);
    RecordProperty("max_abs_error_" + std::string(dtype_name(dtype)), sci(max_abs_error(got, want)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, TinyBert,
    ::testing::Values(TinySpec{}, TinySpec{.hidden_act = "gelu_new", .pooling = "cls"},
                      TinySpec{.hidden_act = "relu", .pooling = "max", .normalize = false},
                      TinySpec{.hidden_act = "gelu_pytorch_tanh", .normalize = false, .prefix = "bert."}),
    [](const ::testing::TestParamInfo<TinySpec>& i) {
      return i.param.hidden_act + "_" + i.param.pooling + (i.param.normalize ? "_normalized" : "") +
             (i.param.prefix.empty() ? "" : "_prefixed");
    });

// Lengths 1..max_seq_length, batches of 8: 5 runs over 4 buckets (40, 32, 16 and 8 tokens, all
// batch 8). Once they are compiled, other mixes of the same lengths replay them.
TEST_F(DeviceTest, BucketsCompileOnceForAllLengths) {
  TinySpec spec;
  TempDir dir("buckets");
  write_tiny(dir.path, spec);
  auto model = SentenceEmbedder::load(device(), dir.path, {.max_batch = 8});
  std::vector<std::vector<int32_t>> seqs;
  for (size_t len = 1; len <= 40; ++len) seqs.push_back(random_ids(len, static_cast<uint32_t>(len)));
  HostTensor first = model.embed_ids(seqs);
  EXPECT_EQ(model.compiled_executors(), 4u);
  std::mt19937 rng(7);
  for (int round = 0; round < 3; ++round) {
    std::shuffle(seqs.begin(), seqs.end(), rng);
    for (auto& s : seqs) s = random_ids(s.size(), static_cast<uint32_t>(s.size() * 31 + round));
    HostTensor again = model.embed_ids(seqs);
    EXPECT_EQ(again.shape(), (Shape{40, 16}));
  }
  EXPECT_EQ(model.compiled_executors(), 4u) << "a warm mix of lengths compiled again";
  // A single sequence is a new bucket (batch 1) once, for every length up to 8.
  for (size_t len = 1; len <= 8; ++len) model.embed_ids(std::vector<std::vector<int32_t>>{random_ids(len, 1)});
  EXPECT_EQ(model.compiled_executors(), 5u);
}

// The padded Hugging Face form gives what the unpadded lists give, whatever the padding width.
TEST_F(DeviceTest, PaddedIdsMatchUnpaddedIds) {
  TinySpec spec;
  TempDir dir("padded");
  write_tiny(dir.path, spec);
  auto model = SentenceEmbedder::load(device(), dir.path);
  std::vector<std::vector<int32_t>> seqs = {random_ids(3, 1), random_ids(11, 2)};
  HostTensor plain = model.embed_ids(seqs);
  const int64_t s = 57;  // over max_seq_length 40: allowed, only the kept spans count
  std::vector<int32_t> ids(2 * s, 0), mask(2 * s, 0);
  for (int64_t r = 0; r < 2; ++r)
    for (size_t t = 0; t < seqs[r].size(); ++t) ids[r * s + t] = seqs[r][t], mask[r * s + t] = 1;
  HostTensor padded = model.embed_ids(HostTensor::from_i32({2, s}, ids), HostTensor::from_i32({2, s}, mask));
  auto a = plain.to_f32(), b = padded.to_f32();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
}

// ------------------------------------------------------------------------------------ bad input
TEST_F(DeviceTest, BadDirectoriesGiveClearErrors) {
  TinySpec spec;
  TempDir dir("bad");
  auto load = [&] { SentenceEmbedder::load(device(), dir.path); };
  write_tiny(dir.path, spec, [](json&, auto& w) { w.erase("encoder.layer.1.output.dense.bias"); });
  EXPECT_TRUE(fails_with(load, ErrorCode::format, "'encoder.layer.1.output.dense.bias' (shape [16]) is missing"));
  write_tiny(dir.path, spec, [](json&, auto& w) {
    w["encoder.layer.0.intermediate.dense.weight"] = {Shape{25, 16}, std::vector<float>(25 * 16)};
  });
  EXPECT_TRUE(fails_with(load, ErrorCode::format,
                         "'encoder.layer.0.intermediate.dense.weight' has shape [25,16], expected [24,16]"));
  write_tiny(dir.path, spec, [](json& c, auto&) { c["hidden_act"] = "silu"; });
  EXPECT_TRUE(fails_with(load, ErrorCode::unsupported, "\"hidden_act\": \"silu\" is not supported"));
  write_tiny(dir.path, spec, [](json& c, auto&) { c["position_embedding_type"] = "relative_key"; });
  EXPECT_TRUE(fails_with(load, ErrorCode::unsupported, "\"position_embedding_type\": \"relative_key\""));
  write_tiny(dir.path, spec, [](json& c, auto&) { c["model_type"] = "roberta"; });
  EXPECT_TRUE(fails_with(load, ErrorCode::unsupported, "\"roberta\" is not supported"));
  write_tiny(dir.path, spec, [](json& c, auto&) { c["rotary_dim"] = 8; });
  EXPECT_TRUE(fails_with(load, ErrorCode::unsupported, "\"rotary_dim\": unknown key"));
  write_tiny(dir.path, spec, [](json& c, auto&) { c["num_attention_heads"] = 3; });
  EXPECT_TRUE(fails_with(load, ErrorCode::format, "does not divide hidden_size 16"));
  write_tiny(dir.path, spec);
  write_text(dir.path / "vocab.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nthe\n");  // no [UNK]
  EXPECT_TRUE(fails_with(load, ErrorCode::format, "[UNK]"));
  write_tiny(dir.path, spec);
  write_text(dir.path / "1_Pooling" / "config.json", R"({"pooling_mode_mean_sqrt_len_tokens": true})");
  EXPECT_TRUE(fails_with(load, ErrorCode::unsupported, "pooling_mode_mean_sqrt_len_tokens"));
  fs::remove(dir.path / "model.safetensors");
  write_text(dir.path / "1_Pooling" / "config.json", R"({"pooling_mode_mean_tokens": true})");
  EXPECT_TRUE(fails_with(load, ErrorCode::io, "model.safetensors"));
  EXPECT_TRUE(fails_with([&] { SentenceEmbedder::load(device(), dir.path / "nowhere"); }, ErrorCode::io,
                         "does not exist"));
}


// Every file the embedder opens (config.json, modules.json, the pooling config,
// sentence_bert_config.json, the tokenizer, the weights) goes through the library's reader: a
// FIFO is refused instead of waited on, a link to /dev/zero is named as a device, config.json is
// refused by its size over 16 MiB, nesting is limited while parsing, and values are described
// in messages, never dumped.
TEST_F(DeviceTest, HostileFilesAreRefusedWithoutReading) {
  TinySpec spec;
  TempDir dir("hostile");
  auto load = [&] { SentenceEmbedder::load(device(), dir.path); };
  // A FIFO (a folder on Windows, which has no special files in folders) in place of each file.
  auto replace_with_fifo = [&](const fs::path& p) {
    write_tiny(dir.path, spec);
    fs::remove(p);
    return make_non_regular_at(p);
  };
  for (const fs::path& p : {dir.path / "config.json", dir.path / "modules.json",
                            dir.path / "1_Pooling" / "config.json", dir.path / "sentence_bert_config.json",
                            dir.path / "vocab.txt", dir.path / "model.safetensors"}) {
    const std::string kind = replace_with_fifo(p);
    // No writer: the read must not wait for one.
    within_seconds(10, "SentenceEmbedder::load with a FIFO", [&] {
      EXPECT_TRUE(fails_with(load, ErrorCode::io, p.string() + ": is " + kind + ", not a regular file"));
    });
    fs::remove(p);  // before write_tiny, whose write would wait for a reader
  }
  const fs::path config = dir.path / "config.json";
  write_tiny(dir.path, spec);
  fs::remove(config);
  // Was read until memory ran out without a check.
  const std::string zero = make_non_regular_at(config, NonRegular::endless_device);
  EXPECT_TRUE(fails_with(load, ErrorCode::io, config.string() + ": is " + zero + ", not a regular file"));
  fs::remove(config);
  write_text(config, tiny_config(spec).dump());
  fs::resize_file(config, 17u << 20);  // sparse: costs no disk; was read whole, then "not valid JSON"
  EXPECT_TRUE(fails_with(load, ErrorCode::io, config.string() + ": 17825792 bytes, more than the 16777216"));

  // Nesting: refused while parsing, named with its limit.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_tiny(dir.path, spec);
  write_text(config, R"({"model_type": "bert", "id2label": )" + deep + "}");
  EXPECT_TRUE(fails_with(load, ErrorCode::format, config.string() + ": arrays and objects nested more than 64 deep"));
  write_text(dir.path / "modules.json", deep);
  EXPECT_TRUE(fails_with(load, ErrorCode::format, "modules.json: arrays and objects nested more than 64 deep"));

  // Values described, not dumped: a long string is quoted and cut short, an array by its size.
  auto message_of = [&] {
    try {
      load();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  write_tiny(dir.path, spec, [](json& c, auto&) { c["model_type"] = std::string(100000, 'x') + "\x01"; });
  std::string m = message_of();
  EXPECT_NE(m.find("\"xxxx"), std::string::npos) << m;
  EXPECT_NE(m.find("(100001 bytes)"), std::string::npos) << m;
  EXPECT_LT(m.size(), 400u) << m.substr(0, 400);
  write_tiny(dir.path, spec, [](json& c, auto&) { c["hidden_act"] = std::string(5000, 'y'); });
  m = message_of();
  EXPECT_NE(m.find("\"hidden_act\": \"yyyy"), std::string::npos) << m.substr(0, 400);
  EXPECT_LT(m.size(), 400u) << m.substr(0, 400);
  write_tiny(dir.path, spec, [](json& c, auto&) { c["rotary_dim"] = std::vector<int>(100000, 7); });
  m = message_of();
  EXPECT_NE(m.find("\"rotary_dim\": unknown key (value an array of 100000 elements)"), std::string::npos)
      << m.substr(0, 400);
  EXPECT_LT(m.size(), 400u) << m.substr(0, 400);
  write_tiny(dir.path, spec);
  write_text(dir.path / "modules.json",
             json::array({{{"path", ""}, {"type", std::string(3000, 'T')}}}).dump());
  m = message_of();
  EXPECT_NE(m.find("'TTTT"), std::string::npos) << m.substr(0, 400);
  EXPECT_LT(m.size(), 400u) << m.substr(0, 400);

  // An unreachable modules.json is an io error naming it, not read as absent (which would load
  // the directory as a plain Hugging Face model, with other pooling).
  // On Windows, a file held open without sharing and a name that Windows refuses.
  write_tiny(dir.path, spec);
  fs::remove(dir.path / "modules.json");
  {
    const UnreadableFile modules(dir.path / "modules.json");  // a link into a loop
    EXPECT_TRUE(fails_with(load, ErrorCode::io,
                           (dir.path / "modules.json").string() + modules.error_after_path()));
  }
  const fs::path loop = unreachable_path(dir.path, "loop");
  EXPECT_TRUE(fails_with([&] { SentenceEmbedder::load(device(), loop); }, ErrorCode::io,
                         "model directory '" + loop.string() + "': cannot access: " +
                             unreachable_reason()));
}

TEST_F(DeviceTest, BadCallsGiveClearErrors) {
  TinySpec spec;
  TempDir dir("calls");
  write_tiny(dir.path, spec);
  auto model = SentenceEmbedder::load(device(), dir.path);
  EXPECT_TRUE(fails_with([&] { model.embed(std::vector<std::string>{}); }, ErrorCode::invalid_argument,
                         "no texts given"));
  EXPECT_TRUE(fails_with([&] { model.embed(std::vector<std::string>{"the cat", "bad \xff byte"}); },
                         ErrorCode::invalid_argument, "text 1"));
  EXPECT_TRUE(fails_with([&] { model.embed_ids(std::vector<std::vector<int32_t>>{}); },
                         ErrorCode::invalid_argument, "no sequences given"));
  EXPECT_TRUE(fails_with([&] { model.embed_ids(std::vector<std::vector<int32_t>>{{2, 99, 3}}); },
                         ErrorCode::invalid_argument, "id 99 is outside the vocabulary [0, 20)"));
  EXPECT_TRUE(fails_with([&] { model.embed_ids(std::vector<std::vector<int32_t>>{std::vector<int32_t>(41, 5)}); },
                         ErrorCode::invalid_argument, "41 ids"));
  HostTensor ids = HostTensor::from_i32({1, 3}, std::vector<int32_t>{2, 5, 3});
  EXPECT_TRUE(fails_with([&] { model.embed_ids(ids, HostTensor::from_i32({1, 3}, std::vector<int32_t>{0, 1, 1})); },
                         ErrorCode::unsupported, "right padding"));
  EXPECT_TRUE(fails_with([&] { model.embed_ids(ids, HostTensor::from_i32({1, 2}, std::vector<int32_t>{1, 1})); },
                         ErrorCode::shape_mismatch, "attention_mask is [1,2]"));
  // Still usable after the errors; text is truncated to max_seq_length rather than refused.
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "the cat sat on a mat . ";
  HostTensor e = model.embed(std::vector<std::string>{"the cat", long_text});
  EXPECT_EQ(e.shape(), (Shape{2, 16}));
}

}  // namespace
}  // namespace vkformer::testing
