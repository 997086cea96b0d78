// Hostile model files (issue 26), part of hostile_input_test: metadata that contradicts the
// tensors (a block_count of 10^9 once grew memory to 3.9 GB before failing; 29 of 30 blocks ran
// silently), a tokenizer of another size than the embedding, BERT configs naming fewer layers
// than the checkpoint, files truncated while they load (a SIGBUS once), and NaN in weights and
// outputs (embed printed null and exited 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io_util.hpp"
#include "test_device.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.hpp"

#ifdef __linux__
#include <sys/resource.h>
#endif

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTests = fs::path(__FILE__).parent_path();
const fs::path kTinyLlama = kTests / "golden_llama" / "tiny" / "tiny_llama_untied.gguf";
const fs::path kEncoder = kTests / "golden" / "encoder_post_relu_b1_s1";

const fs::path& scratch() { return scratch_dir("hostile_test"); }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path write_bytes(const std::string& name, const std::string& bytes) {
  const fs::path path = scratch() / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

uint64_t u64_at(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

// Where the value of GGUF key `key` starts: after its length, name and uint32 type `type`.
size_t gguf_value_at(const std::string& b, const std::string& key, uint32_t type) {
  std::string lead(8, '\0');
  const uint64_t n = key.size();
  std::memcpy(lead.data(), &n, 8);
  const size_t at = b.find(lead + key);
  EXPECT_NE(at, std::string::npos) << key;
  uint32_t t;
  std::memcpy(&t, b.data() + at + 8 + key.size(), 4);
  EXPECT_EQ(t, type) << key;
  return at + 8 + key.size() + 4;
}

// A copy of `gguf` with the uint32 key `key` set to `value`.
fs::path with_u32(const fs::path& gguf, const std::string& key, uint32_t value, const std::string& name) {
  std::string b = read_bytes(gguf);
  std::memcpy(b.data() + gguf_value_at(b, key, 4), &value, 4);
  return write_bytes(name, b);
}

std::string u64_bytes(uint64_t v) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &v, 8);
  return out;
}

// A copy of `gguf` with `count` tokens: tokenizer.ggml.tokens and tokenizer.ggml.token_type (one
// int32 per token) cut to their first `count` entries, or grown by "<extra_N>" tokens of type 1
// (normal), consistent with each other as a converter would write them. The header's length
// changes by a multiple of the alignment (32; the last token is padded to get there), so the data
// section keeps its place relative to the end of the header.
fs::path with_token_count(const fs::path& gguf, uint64_t count, const std::string& name) {
  std::string b = read_bytes(gguf);
  // The tokens: from their count to the end of the last one.
  const size_t tokens_at = gguf_value_at(b, "tokenizer.ggml.tokens", 9) + 4;
  const uint64_t have = u64_at(b, tokens_at);
  std::vector<std::string> tokens;
  size_t at = tokens_at + 8;
  for (uint64_t i = 0; i < have; ++i) {
    tokens.push_back(b.substr(at + 8, u64_at(b, at)));
    at += 8 + tokens.back().size();
  }
  const size_t tokens_end = at;
  // The types: int32s after their element type (5) and count.
  const size_t types_value = gguf_value_at(b, "tokenizer.ggml.token_type", 9);
  EXPECT_EQ(b[types_value], '\x05');
  const size_t types_at = types_value + 4;
  EXPECT_EQ(u64_at(b, types_at), have);
  std::string types = b.substr(types_at + 8, 4 * have);
  tokens.resize(std::min(count, have));
  types.resize(4 * std::min(count, have));
  for (uint64_t i = have; i < count; ++i) {
    tokens.push_back("<extra_" + std::to_string(i) + ">");
    const int32_t normal = 1;
    types.append(reinterpret_cast<const char*>(&normal), 4);
  }
  auto encode_tokens = [&] {
    std::string out = u64_bytes(count);
    for (const std::string& t : tokens) out += u64_bytes(t.size()) + t;
    return out;
  };
  const int64_t old_size = static_cast<int64_t>(tokens_end - tokens_at) + 8 + 4 * static_cast<int64_t>(have);
  int64_t delta = static_cast<int64_t>(encode_tokens().size() + 8 + types.size()) - old_size;
  tokens.back() += std::string(static_cast<size_t>((32 - delta % 32) % 32), 'x');
  const std::string new_tokens = encode_tokens(), new_types = u64_bytes(count) + types;
  delta = static_cast<int64_t>(new_tokens.size() + new_types.size()) - old_size;
  EXPECT_EQ(delta % 32, 0);
  // The later array first, so the earlier one's offsets still hold.
  auto replace_types = [&] { b.replace(types_at, 8 + 4 * have, new_types); };
  auto replace_tokens = [&] { b.replace(tokens_at, tokens_end - tokens_at, new_tokens); };
  if (types_at > tokens_at) {
    replace_types();
    replace_tokens();
  } else {
    replace_tokens();
    replace_types();
  }
  return write_bytes(name, b);
}

// ------------------------------------------------------------------------------- GGUF structure

#ifdef __linux__
// Caps this process's address space at what it uses now plus `extra` bytes for one scope, so a
// loader that allocates by the metadata fails fast (std::bad_alloc) instead of taking the
// machine's memory.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(uint64_t extra) {
    getrlimit(RLIMIT_AS, &old_);
    std::ifstream status("/proc/self/status");
    uint64_t kib = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmSize:", 0) == 0) kib = std::stoull(line.substr(7));
    rlimit cap = old_;
    cap.rlim_cur = std::min<rlim_t>(old_.rlim_cur, kib * 1024 + extra);
    setrlimit(RLIMIT_AS, &cap);
  }
  ~AddressSpaceCap() { setrlimit(RLIMIT_AS, &old_); }

 private:
  rlimit old_{};
};
#endif

TEST_F(DeviceTest, BlockCountsTheTensorsContradictAreRefusedBeforeAnythingIsSized) {
  for (uint32_t blocks : {1000000000u, 2147483648u}) {
    SCOPED_TRACE(blocks);
    const fs::path path = with_u32(kTinyLlama, "llama.block_count", blocks, "blocks_huge.gguf");
    {
#ifdef __linux__
      // 256 MiB more than now: the 9 * 10^9 planned tensor names alone would need 300 GB.
      AddressSpaceCap cap(256u << 20);
#endif
      EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), path); }, ErrorCode::format,
                             path.string() + ": llama.block_count is " + std::to_string(blocks) +
                                 " but the file's tensors are those of 2 blocks (blk.0 .. blk.1)"));
    }
  }
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), with_u32(kTinyLlama, "llama.block_count", 1, "b1.gguf")); },
                         ErrorCode::format, "llama.block_count is 1 but the file's tensors are those of 2 blocks"));
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), with_u32(kTinyLlama, "llama.block_count", 3, "b3.gguf")); },
                         ErrorCode::format, "llama.block_count is 3 but the file's tensors are those of 2 blocks"));
  // A tensor a llama does not have: output.weight renamed, which made the model a tied one that
  // ignored its output matrix. And a block tensor missing is named before that.
  std::string b = read_bytes(kTinyLlama);
  const std::string output("\x0d\0\0\0\0\0\0\0output.weight", 21);
  const size_t at = b.find(output);
  ASSERT_NE(at, std::string::npos);
  b.replace(at + 8, 13, "outpux.weight");
  const fs::path extra = write_bytes("unknown_tensor.gguf", b);
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), extra); }, ErrorCode::unsupported,
                         extra.string() + ": tensor outpux.weight is not one a llama model uses"));
  b = read_bytes(kTinyLlama);
  b.replace(b.find("blk.1.ffn_up.weight"), 19, "blk.1.ffn_up.biasxx");
  const fs::path missing = write_bytes("missing_tensor.gguf", b);
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), missing); }, ErrorCode::format,
                         missing.string() + ": tensor blk.1.ffn_up.weight is missing (the file has blocks blk.0 .. blk.1)"));
}

TEST_F(DeviceTest, TokenizersOfAnotherSizeThanTheEmbeddingAreRefusedAtLoad) {
  // 384 rows in token_embd.weight: more tokens once failed mid-prompt ("token ... outside the
  // vocabulary"), fewer once streamed text, then died mid-answer.
  for (uint64_t tokens : {484u, 300u}) {
    SCOPED_TRACE(tokens);
    const fs::path path = with_token_count(kTinyLlama, tokens, "tokens.gguf");
    ASSERT_EQ(GgufFile(path).get_strings("tokenizer.ggml.tokens").size(), tokens);
    EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), path); }, ErrorCode::format,
                           path.string() + ": tokenizer.ggml.tokens has " + std::to_string(tokens) +
                               " tokens but token_embd.weight has 384 rows, one per token"));
  }
}

// SmolLM2 (scripts/fetch_smollm2.sh): the cases on the real file.
TEST_F(DeviceTest, SmolLM2WithAContradictingBlockCountOrTokenizerIsRefused) {
  const FetchedModel& m = smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  const fs::path b29 = with_u32(m.path, "llama.block_count", 29, "smollm2_29.gguf");
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), b29); }, ErrorCode::format,
                         "llama.block_count is 29 but the file's tensors are those of 30 blocks (blk.0 .. blk.29)"));
  fs::remove(b29);
  const fs::path t = with_token_count(m.path, 49252, "smollm2_tokens.gguf");
  EXPECT_TRUE(fails_with([&] { LanguageModel::load(device(), t); }, ErrorCode::format,
                         "tokenizer.ggml.tokens has 49252 tokens but token_embd.weight has 49152 rows"));
  fs::remove(t);
}

// ------------------------------------------------------------------------------- tiny BERT

// A Hugging Face BERT directory with `layers` layers of width 8 and a 12-token vocabulary;
// `edit` may change the config and the tensors before they are written.
using Tensors = std::vector<std::pair<std::string, HostTensor>>;
fs::path write_tiny_bert(const std::string& name, int64_t layers,
                         const std::function<void(json&, Tensors&)>& edit = {}) {
  const fs::path dir = scratch() / name;
  fs::create_directories(dir);
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world",
                                          "a", "##a", "b", "##b", "!", "."};
  const int64_t h = 8, f = 16, v = static_cast<int64_t>(vocab.size());
  json config = {{"model_type", "bert"}, {"hidden_size", h}, {"num_attention_heads", 2},
                 {"intermediate_size", f}, {"num_hidden_layers", layers}, {"max_position_embeddings", 32},
                 {"type_vocab_size", 2}, {"vocab_size", v}, {"hidden_act", "gelu"}};
  Tensors t;
  uint32_t seed = 1;
  auto add = [&](const std::string& n, const Shape& s, float lo, float hi) {
    t.emplace_back(n, HostTensor::from_f32(s, random_values(s.numel(), seed++, lo, hi)));
  };
  add("embeddings.word_embeddings.weight", {v, h}, -1, 1);
  add("embeddings.position_embeddings.weight", {32, h}, -0.5, 0.5);
  add("embeddings.token_type_embeddings.weight", {2, h}, -0.5, 0.5);
  add("embeddings.LayerNorm.weight", {h}, 0.8, 1.2);
  add("embeddings.LayerNorm.bias", {h}, -0.2, 0.2);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + m + ".weight", {h, h}, -0.4, 0.4);
      add(p + m + ".bias", {h}, -0.2, 0.2);
    }
    add(p + "intermediate.dense.weight", {f, h}, -0.4, 0.4);
    add(p + "intermediate.dense.bias", {f}, -0.2, 0.2);
    add(p + "output.dense.weight", {h, f}, -0.4, 0.4);
    add(p + "output.dense.bias", {h}, -0.2, 0.2);
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      add(p + n + ".weight", {h}, 0.8, 1.2);
      add(p + n + ".bias", {h}, -0.2, 0.2);
    }
  }
  if (edit) edit(config, t);
  std::ofstream(dir / "config.json") << config.dump();
  write_safetensors(dir / "model.safetensors", t);
  std::ofstream out(dir / "vocab.txt");
  for (const std::string& token : vocab) out << token << "\n";
  return dir;
}

HostTensor& tensor_named(Tensors& t, const std::string& name) {
  for (auto& [n, v] : t)
    if (n == name) return v;
  throw std::runtime_error("no tensor " + name);
}

TEST_F(DeviceTest, BertConfigsNamingOtherLayerCountsThanTheCheckpointAreRefused) {
  // num_hidden_layers 3 or 0 with a 6-layer checkpoint silently ran 3 or 0 layers.
  for (int64_t layers : {3, 0, 7}) {
    SCOPED_TRACE(layers);
    const fs::path dir = write_tiny_bert("layers" + std::to_string(layers), 6,
                                         [&](json& c, Tensors&) { c["num_hidden_layers"] = layers; });
    EXPECT_TRUE(fails_with([&] { SentenceEmbedder::load(device(), dir); }, ErrorCode::format,
                           (dir / "model.safetensors").string() +
                               ": holds 6 encoder layers (encoder.layer.0 .. encoder.layer.5) but config.json's "
                               "num_hidden_layers is " + std::to_string(layers)));
  }
  const fs::path ok = write_tiny_bert("layers_ok", 6);
  EXPECT_EQ(SentenceEmbedder::load(device(), ok).embed(std::vector<std::string>{"hello world"}).shape(),
            (Shape{1, 8}));
}

TEST_F(DeviceTest, NonFiniteWeightsAndOutputsAreErrorsNotNull) {
  // A NaN LayerNorm weight gave embed exit 0 and arrays of null.
  const fs::path nan_dir = write_tiny_bert("nan_weight", 2, [](json&, Tensors& t) {
    HostTensor& w = tensor_named(t, "encoder.layer.1.output.LayerNorm.weight");
    std::vector<float> v = w.to_f32();
    v[5] = std::numeric_limits<float>::quiet_NaN();
    w = HostTensor::from_f32(w.shape(), v);
  });
  EXPECT_TRUE(fails_with([&] { SentenceEmbedder::load(device(), nan_dir); }, ErrorCode::format,
                         "tensor 'encoder.layer.1.output.LayerNorm.weight' holds NaN at index 5 of 8; weights must "
                         "be finite"));
  const fs::path inf_dir = write_tiny_bert("inf_weight", 2, [](json&, Tensors& t) {
    HostTensor& w = tensor_named(t, "embeddings.word_embeddings.weight");
    std::vector<float> v = w.to_f32();
    v[17] = -std::numeric_limits<float>::infinity();
    w = HostTensor::from_f32(w.shape(), v);
  });
  EXPECT_TRUE(fails_with([&] { SentenceEmbedder::load(device(), inf_dir); }, ErrorCode::format,
                         "tensor 'embeddings.word_embeddings.weight' holds -inf at index 17"));
  // Finite weights whose products overflow float16 storage: the embedding would be NaN.
  const fs::path big_dir = write_tiny_bert("f16_overflow", 1, [](json&, Tensors& t) {
    HostTensor& w = tensor_named(t, "encoder.layer.0.intermediate.dense.weight");
    w = HostTensor::from_f32(w.shape(), random_values(static_cast<size_t>(w.numel()), 7, -60000.0f, 60000.0f));
  });
  SentenceEmbedder f16 = SentenceEmbedder::load(device(), big_dir, {.dtype = DType::f16});
  EXPECT_TRUE(fails_with([&] { f16.embed(std::vector<std::string>{"hello world", "a b"}); }, ErrorCode::unsupported,
                         "SentenceEmbedder::embed: the embedding of text 0 has NaN at dimension 0: the model "
                         "overflows float16; load it with dtype f32"));
  SentenceEmbedder f32 = SentenceEmbedder::load(device(), big_dir, {.dtype = DType::f32});
  const std::vector<float> e = f32.embed(std::vector<std::string>{"hello world"}).to_f32();
  for (float x : e) EXPECT_TRUE(std::isfinite(x)) << x;
}

// A NaN in one row of a language model's output matrix: one logit is NaN, which greedy sampling
// passed over (NaN compares false), streaming text as if nothing were wrong. Now an error.
TEST_F(DeviceTest, NonFiniteLogitsStopGenerationWithAnError) {
  std::string b = read_bytes(kTinyLlama);
  {
    GgufFile f = GgufFile::from_bytes(std::vector<std::byte>(reinterpret_cast<const std::byte*>(b.data()),
                                                             reinterpret_cast<const std::byte*>(b.data()) + b.size()));
    const GgufTensorInfo& t = f.tensor("output.weight");
    ASSERT_EQ(t.type, GgmlType::Q4_1);  // blocks of an f16 scale, an f16 minimum and nibbles
    const uint64_t row_bytes = ggml_row_bytes(t.type, t.row_length());
    const uint16_t nan = 0x7e00;  // the scale d of row 7's first block
    std::memcpy(b.data() + f.data_offset() + t.offset + 7 * row_bytes, &nan, 2);
  }
  const fs::path path = write_bytes("nan_weight.gguf", b);
  LanguageModel lm = LanguageModel::load(device(), path);
  const std::vector<int32_t> prompt = lm.tokenizer().encode("hello");
  std::string streamed;
  EXPECT_TRUE(fails_with(
      [&] {
        generate(lm, prompt, {.max_tokens = 4}, [&](std::string_view t, int32_t) {
          streamed += t;
          return true;
        });
      },
      ErrorCode::unsupported,
      "generate: the logits after position " + std::to_string(prompt.size()) + " hold NaN (token 7): the model's "
      "weights hold NaN or infinities"));
  EXPECT_EQ(streamed, "");
  // Greedy decoding's choice on the device (what generate() checks after each decoded token)
  // names the same entry, through the prompt chunk's greedy graph and the decode step's.
  const std::vector<int32_t> words = lm.tokenizer().encode("hello there, hello again");
  ASSERT_GT(words.size(), 1u);
  for (size_t n : {words.size(), size_t{1}}) {
    lm.reset();
    const GreedyToken t = lm.append_greedy(std::span<const int32_t>(words).first(n));
    EXPECT_EQ(t.non_finite, 7) << n << " tokens";
    EXPECT_TRUE(std::isnan(t.non_finite_value)) << n << " tokens: " << t.non_finite_value;
    EXPECT_NE(t.token, 7) << n << " tokens";
    EXPECT_GE(t.token, 0) << n << " tokens";
  }
}

// A NaN in the embedding row of the token greedy decoding chooses first: the prompt's logits are
// finite, the first decoded step's are all NaN. generate() chooses that step's token on the
// device (append_greedy) and must refuse it with the same error as from logits in hand.
TEST_F(DeviceTest, NonFiniteLogitsOfADecodedStepStopGreedyGenerationWithAnError) {
  std::string b = read_bytes(kTinyLlama);
  int32_t first = -1;
  std::vector<int32_t> prompt;
  {
    LanguageModel lm = LanguageModel::load(device(), kTinyLlama);
    prompt = lm.tokenizer().encode("hello");
    first = generate(lm, prompt, {.max_tokens = 1}).tokens.at(0);
  }
  ASSERT_EQ(std::find(prompt.begin(), prompt.end(), first), prompt.end()) << "the prompt holds " << first;
  {
    GgufFile f = GgufFile::from_bytes(std::vector<std::byte>(reinterpret_cast<const std::byte*>(b.data()),
                                                             reinterpret_cast<const std::byte*>(b.data()) + b.size()));
    const GgufTensorInfo& t = f.tensor("token_embd.weight");
    const uint64_t row = f.data_offset() + t.offset + static_cast<uint64_t>(first) * ggml_row_bytes(t.type, t.row_length());
    if (t.type == GgmlType::F32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(b.data() + row, &nan, 4);
    } else {  // F16, or blocks that start with an f16 scale
      ASSERT_TRUE(t.type == GgmlType::F16 || t.type == GgmlType::Q4_0 || t.type == GgmlType::Q4_1 ||
                  t.type == GgmlType::Q8_0)
          << "token_embd.weight's type changed: put the NaN where its first element's bits are";
      const uint16_t nan = 0x7e00;
      std::memcpy(b.data() + row, &nan, 2);
    }
  }
  LanguageModel lm = LanguageModel::load(device(), write_bytes("nan_embedding_row.gguf", b));
  std::vector<int32_t> streamed;
  EXPECT_TRUE(fails_with(
      [&] {
        generate(lm, prompt, {.max_tokens = 4}, [&](std::string_view, int32_t token) {
          streamed.push_back(token);
          return true;
        });
      },
      ErrorCode::unsupported,
      "generate: the logits after position " + std::to_string(prompt.size() + 1) + " hold NaN (token 0): the "
      "model's weights hold NaN or infinities"));
  EXPECT_EQ(streamed, std::vector<int32_t>{first});  // the prompt's choice, from finite logits
}

// ------------------------------------------------------------------------------- truncated while loading

// Truncates `path` to `size` bytes in place; false where the system refuses because the file is
// mapped (Windows does, so there a mapped file cannot shrink under its reader).
bool truncate_in_place(const fs::path& path, uint64_t size) {
  std::error_code ec;
  fs::resize_file(path, size, ec);
#ifndef _WIN32
  EXPECT_FALSE(ec) << path << ": " << ec.message();
#endif
  return !ec;
}

// Truncates every file a reader opens to half its size, right after its header was read and
// before any tensor is: what another program truncating the file while it loads does.
class TruncateOnOpen {
 public:
  TruncateOnOpen() {
    io::set_opened_hook_for_tests([this](const fs::path& p) {
      ++count;
      truncated += truncate_in_place(p, fs::file_size(p) / 2);
    });
  }
  ~TruncateOnOpen() { io::set_opened_hook_for_tests({}); }
  // Where the truncation was refused (Windows), the load works: expect that instead.
  ::testing::AssertionResult fails_or_loads(const std::function<void()>& load, const std::string& needle) {
    const int before = truncated;
    try {
      load();
    } catch (const Error& e) {
      if (truncated > before && e.code() == ErrorCode::io && std::string(e.what()).find(needle) != std::string::npos)
        return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "threw: " << e.what();
    }
    if (truncated == before) return ::testing::AssertionSuccess() << "(the system refused the truncation)";
    return ::testing::AssertionFailure() << "the file was truncated while loading, and the load succeeded";
  }
  int count = 0, truncated = 0;
};

TEST_F(DeviceTest, FilesTruncatedWhileLoadingAreErrorsNotSignals) {
  const std::string changed = ": the file changed while loading: it now has ";
  {
    const fs::path gguf = write_bytes("truncated.gguf", read_bytes(kTinyLlama));
    TruncateOnOpen truncate;
    EXPECT_TRUE(truncate.fails_or_loads([&] { LanguageModel::load(device(), gguf); }, gguf.string() + changed));
    EXPECT_EQ(truncate.count, 1);
  }
  {
    const fs::path dir = write_tiny_bert("truncated_bert", 2);
    TruncateOnOpen truncate;
    EXPECT_TRUE(truncate.fails_or_loads([&] { SentenceEmbedder::load(device(), dir); },
                                        (dir / "model.safetensors").string() + changed));
    EXPECT_EQ(truncate.count, 1);
  }
  {
    const fs::path dir = scratch() / "truncated_encoder";
    fs::create_directories(dir);
    fs::copy_file(kEncoder / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    fs::copy_file(kEncoder / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
    TruncateOnOpen truncate;
    EXPECT_TRUE(truncate.fails_or_loads([&] { Model::load(device(), dir.string()); },
                                        (dir / "model.safetensors").string() + changed));
    EXPECT_EQ(truncate.count, 1);
  }
  // The readers alone, with the file mapped: reads after the truncation fail the same way, and
  // the file's size at opening is named.
  const fs::path gguf = write_bytes("truncated_reader.gguf", read_bytes(kTinyLlama));
  GgufFile g(gguf);
  ASSERT_TRUE(g.memory_mapped());
  const uint64_t size = fs::file_size(gguf);
  if (truncate_in_place(gguf, g.data_offset())) {
    EXPECT_TRUE(fails_with([&] { g.read_raw("blk.1.ffn_up.weight"); }, ErrorCode::io,
                           changed + std::to_string(g.data_offset()) + " bytes but had " + std::to_string(size) +
                               " when it was opened (reading "));
    EXPECT_TRUE(fails_with([&] { g.read_f32("output_norm.weight"); }, ErrorCode::io, changed));
  }
  const fs::path st = scratch() / "truncated_reader.safetensors";
  fs::copy_file(kEncoder / "model.safetensors", st, fs::copy_options::overwrite_existing);
  SafetensorsFile s(st);
  ASSERT_TRUE(s.memory_mapped());
  if (truncate_in_place(st, 64))
    EXPECT_TRUE(fails_with([&] { s.read(s.entries().back().name); }, ErrorCode::io, changed + "64 bytes but had"));
}

}  // namespace
}  // namespace vkformer::testing
