// GgufTokenizer against llama.cpp's tokenizer: every text of tests/golden_bpe/corpus.json must
// give the ids llama-tokenize gave (tests/fixtures/make_bpe_golden.py) for SmolLM2-135M-Instruct
// (pre-tokenizer smollm) and llama.cpp's vocabulary files (byte-level BPE, SentencePiece and
// SentencePiece-style BPE: GoldenCorpus lists them); byte-level BPE decoding round trips; streaming through Utf8StreamDecoder only ever yields valid UTF-8;
// and metadata that does not fit together is a format error naming the key. Host only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "io_util.hpp"  // is_valid_utf8: strict (no overlongs, surrogates, > U+10FFFF)
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/bpe_tokenizer.hpp"  // the deprecated alias; includes gguf_tokenizer.hpp
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/gguf.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vkformer::GgufTokenizer;
using vkformer::ErrorCode;
using vkformer::GgufFile;
using vkformer::io::is_valid_utf8;
using vkformer::Utf8StreamDecoder;
using vkformer::testing::fails_with;
using vkformer::testing::FetchedModel;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return json::parse(in);
}

struct CorpusText {
  std::string category;
  std::string bytes;
  bool valid_utf8;
};

const std::vector<CorpusText>& corpus() {
  static const std::vector<CorpusText> texts = [] {
    std::vector<CorpusText> out;
    for (const json& item : read_json(fs::path(VKF_BPE_GOLDEN_DIR) / "corpus.json")) {
      CorpusText t{item.at("category"), {}, !item.contains("hex")};
      if (t.valid_utf8) {
        t.bytes = item.at("text");
      } else {
        std::string hex = item.at("hex");
        for (size_t i = 0; i < hex.size(); i += 2)
          t.bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
      out.push_back(std::move(t));
    }
    return out;
  }();
  return texts;
}

// The GGUF file of a golden vocabulary, or why there is none.
FetchedModel vocab_file(const std::string& name) {
  const FetchedModel& source = name == "smollm2" ? vkformer::testing::smollm2_gguf() : vkformer::testing::llama_vocabs_dir();
  if (!source.error.empty() || name == "smollm2") return source;
  return {source.path / ("ggml-vocab-" + name + ".gguf"), ""};
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Every vocabulary with corpus goldens: the byte-level BPE ones below and SentencePiece
// (llama-spm: Llama 2, Mistral; phi-3), SentencePiece-style BPE (gemma-4) and the other
// pre-tokenizers llama.cpp ships vocabularies for.
class GoldenCorpus : public ::testing::TestWithParam<std::string> {};
// The byte-level BPE vocabularies (GPT-2's byte-to-character map), whose every token decodes to
// its bytes.
class GoldenVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCorpus, EveryTextGivesLlamaCppsIds) {
  const std::string name = GetParam();
  FetchedModel file = vocab_file(name);
  ASSERT_TRUE(file.error.empty()) << file.error;
  const json golden = read_json(fs::path(VKF_BPE_GOLDEN_DIR) / (name + ".json"));
  const GgufTokenizer tok = GgufTokenizer::load(file.path);
  const auto& texts = corpus();
  ASSERT_EQ(golden.at("ids").size(), texts.size());
  const bool add_special = golden.at("add_special");
  EXPECT_EQ(add_special, tok.add_bos() || tok.add_eos());
  size_t checked = 0, mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (bool parse_special : {true, false}) {
      const auto want = golden.at(parse_special ? "ids" : "ids_no_parse_special")[i]
                            .get<std::vector<int32_t>>();
      const auto got = tok.encode(texts[i].bytes, add_special, parse_special);
      ++checked;
      if (got != want && ++mismatches <= 10)
        ADD_FAILURE() << name << " text " << i << " (" << texts[i].category
                      << ", parse_special " << parse_special << ") "
                      << ::testing::PrintToString(texts[i].bytes) << "\n got " << show(got)
                      << "\nwant " << show(want);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << checked;
  RecordProperty("texts_compared", static_cast<int>(checked));
}

// Code written against the tokenizer's first name still compiles (with a deprecation warning).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<vkformer::BpeTokenizer, GgufTokenizer>);
#pragma GCC diagnostic pop

std::string byte_char(uint8_t byte);

// Decoding what was encoded gives the text back, and so does streaming the tokens' bytes one
// token at a time through a Utf8StreamDecoder, whose every piece is valid UTF-8. "Back" means
// without the bytes the vocabulary has no token for (SmolLM2 lacks some C0 controls, falcon
// vertical tab): llama.cpp drops those.
TEST_P(GoldenVocab, DecodeAndStreamingRoundTrip) {
  const std::string name = GetParam();
  FetchedModel file = vocab_file(name);
  ASSERT_TRUE(file.error.empty()) << file.error;
  const GgufTokenizer tok = GgufTokenizer::load(file.path);
  size_t tokens = 0, missing = 0;
  bool has_byte[256];
  for (int b = 0; b < 256; ++b) {
    has_byte[b] = tok.token_to_id(byte_char(static_cast<uint8_t>(b))).has_value();
    missing += !has_byte[b];
  }
  for (const CorpusText& t : corpus()) {
    std::string representable;
    for (char c : t.bytes)
      if (has_byte[static_cast<unsigned char>(c)]) representable.push_back(c);
    for (bool parse_special : {true, false}) {
      const auto ids = tok.encode(t.bytes, false, parse_special);
      const std::string decoded = tok.decode(ids);
      if (t.valid_utf8) EXPECT_EQ(decoded, representable) << ::testing::PrintToString(t.bytes);
      Utf8StreamDecoder stream;
      std::string streamed;
      for (int32_t id : ids) {
        std::string piece = stream.push(tok.token_bytes(id));
        EXPECT_TRUE(is_valid_utf8(piece)) << ::testing::PrintToString(piece);
        streamed += piece;
        ++tokens;
      }
      std::string rest = stream.flush();
      EXPECT_TRUE(is_valid_utf8(rest));
      streamed += rest;
      if (t.valid_utf8) EXPECT_EQ(streamed, representable);
    }
  }
  RecordProperty("tokens_streamed", static_cast<int>(tokens));
  RecordProperty("bytes_without_token", static_cast<int>(missing));
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, GoldenVocab,
                         ::testing::Values("smollm2", "gpt-2", "llama-bpe", "qwen2", "falcon"), test_name);
INSTANTIATE_TEST_SUITE_P(LlamaCpp, GoldenCorpus,
                         ::testing::Values("smollm2", "gpt-2", "llama-bpe", "qwen2", "falcon", "llama-spm",
                                           "phi-3", "gemma-4", "command-r", "deepseek-coder", "deepseek-llm",
                                           "mpt", "qwen35", "refact", "starcoder", "aquila", "gpt-neox",
                                           "baichuan"),
                         test_name);

TEST(GgufTokenizer, SmolLM2Metadata) {
  const FetchedModel& m = vkformer::testing::smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  const GgufTokenizer tok = GgufTokenizer::load(m.path);
  EXPECT_EQ(tok.vocab_size(), 49152u);
  EXPECT_EQ(tok.pre_tokenizer(), "smollm");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.eot_id(), 2);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 1);
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(198), "\xC4\x8A");  // GPT-2's character for '\n'
  EXPECT_EQ(tok.token_bytes(198), "\n");
  EXPECT_EQ(tok.token_bytes(2), "<|im_end|>");
  EXPECT_TRUE(tok.is_control(1));
  EXPECT_FALSE(tok.is_control(198));
  // llama.cpp's end-of-generation set: <|endoftext|>, <|im_end|> (EOS) and <reponame>, which
  // it takes for a fill-in-the-middle "repository" token.
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < static_cast<int32_t>(tok.vocab_size()); ++id)
    if (tok.is_end_of_generation(id)) eog.push_back(id);
  EXPECT_EQ(eog, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_FALSE(tok.is_end_of_generation(-1));
  EXPECT_TRUE(fails_with([&] { tok.id_to_token(49152); }, ErrorCode::invalid_argument, "49152"));
  const std::vector<int32_t> bad = {1, -3};
  EXPECT_TRUE(fails_with([&] { tok.decode(bad); }, ErrorCode::invalid_argument, "-3"));
  GgufTokenizer moved = tok;
  GgufTokenizer taken = std::move(moved);
  EXPECT_TRUE(fails_with([&] { moved.vocab_size(); }, ErrorCode::invalid_argument, "moved"));
  EXPECT_EQ(taken.vocab_size(), 49152u);
}

// ------------------------------------------------------------------ synthetic vocabularies
// A GGUF with no tensors and the given metadata, each value an already encoded (type, bytes).
struct Value {
  uint32_t type;
  std::vector<uint8_t> bytes;
};
void put(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, std::string_view s) {
  put(b, s.size(), 8);
  b.insert(b.end(), s.begin(), s.end());
}
Value str(std::string_view s) {
  Value v{8, {}};
  put_str(v.bytes, s);
  return v;
}
Value u32(uint32_t x) {
  Value v{4, {}};
  put(v.bytes, x, 4);
  return v;
}
Value boolean(bool x) { return {7, {static_cast<uint8_t>(x)}}; }
Value strings(const std::vector<std::string>& items) {
  Value v{9, {}};
  put(v.bytes, 8, 4);
  put(v.bytes, items.size(), 8);
  for (const auto& s : items) put_str(v.bytes, s);
  return v;
}
Value i32s(const std::vector<int32_t>& items) {
  Value v{9, {}};
  put(v.bytes, 5, 4);
  put(v.bytes, items.size(), 8);
  for (int32_t x : items) put(v.bytes, static_cast<uint32_t>(x), 4);
  return v;
}
using Metadata = std::map<std::string, Value>;

GgufFile gguf(const Metadata& kvs) {
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put(b, 3, 4);
  put(b, 0, 8);
  put(b, kvs.size(), 8);
  for (const auto& [k, v] : kvs) {
    put_str(b, k);
    put(b, v.type, 4);
    b.insert(b.end(), v.bytes.begin(), v.bytes.end());
  }
  b.resize((b.size() + 31) / 32 * 32, 0);
  std::vector<std::byte> bytes(b.size());
  std::memcpy(bytes.data(), b.data(), b.size());
  return GgufFile::from_bytes(std::move(bytes), "vocab.gguf");
}

// GPT-2's printable character for a byte (the map every byte-level BPE vocabulary uses).
std::string byte_char(uint8_t byte) {
  int cp = byte;
  if (!((byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE)) {
    int n = 0;
    for (int b = 0; b < byte; ++b)
      if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// The 256 byte characters (ids 0..255), then "ab", "abc", "Ġa" (ids 256..258), then the
// special tokens <c> (control), <c><d> (control), <u> (user defined).
Metadata tiny_vocab() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(static_cast<uint8_t>(b)));
  for (const char* t : {"ab", "abc", "\xC4\xA0" "a", "<c>", "<c><d>", "<u>"}) tokens.push_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types[259] = types[260] = 3;
  types[261] = 4;
  return {{"tokenizer.ggml.model", str("gpt2")},
          {"tokenizer.ggml.pre", str("gpt-2")},
          {"tokenizer.ggml.tokens", strings(tokens)},
          {"tokenizer.ggml.token_type", i32s(types)},
          {"tokenizer.ggml.merges", strings({"a b", "ab c", "\xC4\xA0 a"})},
          {"tokenizer.ggml.bos_token_id", u32(259)},
          {"tokenizer.ggml.eos_token_id", u32(259)}};
}

TEST(GgufTokenizer, SyntheticVocabularyFollowsLlamaCppsRules) {
  const GgufTokenizer tok = GgufTokenizer::from_gguf(gguf(tiny_vocab()));
  using V = std::vector<int32_t>;
  // Merges by rank: "a b" then "ab c". A space starts the next word ("Ġ" is byte 0x20's
  // character, id 32): " ab" merges a+b first (rank 0), and "Ġ ab" is no merge.
  EXPECT_EQ(tok.encode("abc", false), (V{257}));
  EXPECT_EQ(tok.encode("abd ab a", false), (V{256, 'd', 32, 256, 258}));
  // Special tokens: the longest first (<c><d> over <c>); control tokens only when parsed;
  // user-defined ones always, as llama.cpp's tokenizer_st_partition does.
  EXPECT_EQ(tok.encode("<c><d>x<c>", false), (V{260, 'x', 259}));
  EXPECT_EQ(tok.encode("<u>x<c>", false, false), (V{261, 'x', '<', 'c', '>'}));
  // BOS and EOS only when the file asks for them.
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.encode("a", true), (V{'a'}));
  Metadata with_bos = tiny_vocab();
  with_bos["tokenizer.ggml.add_bos_token"] = boolean(true);
  with_bos["tokenizer.ggml.add_eos_token"] = boolean(true);
  const GgufTokenizer both = GgufTokenizer::from_gguf(gguf(with_bos));
  EXPECT_EQ(both.encode("a", true), (V{259, 'a', 259}));
  EXPECT_EQ(both.encode("a", false), (V{'a'}));
  // Invalid UTF-8 is read as U+FFFD (EF BF BD), byte by byte.
  EXPECT_EQ(tok.encode("\xFF", false), (V{0xEF, 0xBF, 0xBD}));
  // A word-sized token is taken whole only by pre-tokenizers that ignore merges (llama3).
  Metadata llama3 = tiny_vocab();
  llama3["tokenizer.ggml.pre"] = str("llama-bpe");
  llama3["tokenizer.ggml.merges"] = strings({"a b", "\xC4\xA0 a"});  // nothing makes "abc"
  const GgufTokenizer l3 = GgufTokenizer::from_gguf(gguf(llama3));
  EXPECT_EQ(l3.encode("abc", false), (V{257}));
  EXPECT_TRUE(l3.add_bos());  // llama.cpp's default for the llama3 family
  Metadata gpt2 = llama3;
  gpt2["tokenizer.ggml.pre"] = str("gpt-2");
  EXPECT_EQ(GgufTokenizer::from_gguf(gguf(gpt2)).encode("abc", false), (V{256, 'c'}));
}

Value f32s(const std::vector<float>& items) {
  Value v{9, {}};
  put(v.bytes, 6, 4);
  put(v.bytes, items.size(), 8);
  for (float x : items) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    put(v.bytes, bits, 4);
  }
  return v;
}

// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258),
// then "\u2581", "a", "b", "ab", "\u2581a", "\u2581ab" (ids 259..264) scored so that "\u2581a"
// merges before "ab".
Metadata tiny_spm() {
  const std::string s = "\xE2\x96\x81";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);
    scores.push_back(0);
  }
  for (auto [t, score] : std::vector<std::pair<std::string, float>>{
           {s, -1}, {"a", -2}, {"b", -3}, {"ab", -5}, {s + "a", -4}, {s + "ab", -6}}) {
    tokens.push_back(t);
    types.push_back(1);
    scores.push_back(score);
  }
  return {{"tokenizer.ggml.model", str("llama")},
          {"tokenizer.ggml.tokens", strings(tokens)},
          {"tokenizer.ggml.token_type", i32s(types)},
          {"tokenizer.ggml.scores", f32s(scores)}};
}

// llama.cpp's SentencePiece rules: a space (U+2581) before text at the start and after a special
// token, merges by the merged token's score, bytes without a token as <0xNN>, BOS by default.
TEST(GgufTokenizer, SentencePieceFollowsLlamaCppsRules) {
  using V = std::vector<int32_t>;
  const GgufTokenizer tok = GgufTokenizer::from_gguf(gguf(tiny_spm()));
  EXPECT_EQ(tok.bos_id(), 1);  // llama.cpp's defaults for SentencePiece: BOS 1, EOS 2, BOS added
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
  // "\u2581ab": \u2581+a (score -4) before a+b (-5), then \u2581a+b.
  EXPECT_EQ(tok.encode("ab", false), (V{264}));
  EXPECT_EQ(tok.encode("ab", true), (V{1, 264}));
  // "\u2581b\u2581a": no merge makes "\u2581b"; the second space starts "\u2581a".
  EXPECT_EQ(tok.encode("b a", false), (V{259, 261, 263}));
  // é has no token: its two bytes.
  EXPECT_EQ(tok.encode("\xC3\xA9", false), (V{259, 3 + 0xC3, 3 + 0xA9}));
  // After a special token the text gets its space again; without parse_special </s> is text.
  EXPECT_EQ(tok.encode("a</s>b", false), (V{263, 2, 259, 261}));
  EXPECT_EQ(tok.encode("a</s>", false, false).front(), 263);
  EXPECT_EQ(tok.token_bytes(263), " a");
  EXPECT_EQ(tok.token_bytes(3 + 0xC3), "\xC3");
  // decode drops the space prefix from the first token only, as llama.cpp's detokenizer does.
  EXPECT_EQ(tok.decode(tok.encode("ab b \xC3\xA9", true)), "<s> ab b \xC3\xA9");
  EXPECT_EQ(tok.decode(tok.encode("ab b", false)), "ab b");
  // add_space_prefix = false: no space before the text.
  Metadata no_prefix = tiny_spm();
  no_prefix["tokenizer.ggml.add_space_prefix"] = boolean(false);
  const GgufTokenizer raw = GgufTokenizer::from_gguf(gguf(no_prefix));
  EXPECT_EQ(raw.encode("ab", false), (V{262}));
  EXPECT_EQ(raw.decode(raw.encode(" ab", false)), " ab");
  // Scores must be one per token.
  Metadata bad = tiny_spm();
  bad["tokenizer.ggml.scores"] = f32s({1.0f});
  EXPECT_TRUE(fails_with([&] { GgufTokenizer::from_gguf(gguf(bad)); }, ErrorCode::format,
                         "tokenizer.ggml.scores: 1 scores for 265 tokens"));
}

// Each mistake in the metadata is a format error naming the key.
TEST(GgufTokenizer, BadMetadataIsAFormatErrorNamingTheKey) {
  auto fails = [](Metadata m, std::string_view needle) {
    return fails_with([&] { GgufTokenizer::from_gguf(gguf(m)); }, ErrorCode::format, needle);
  };
  auto with = [](std::string key, Value v) {
    Metadata m = tiny_vocab();
    m[key] = std::move(v);
    return m;
  };
  auto without = [](std::string key) {
    Metadata m = tiny_vocab();
    m.erase(key);
    return m;
  };
  // A kind of vocabulary or a pre-tokenizer vkformer does not have is unsupported, named.
  auto unsupported = [](Metadata m, std::string_view needle) {
    return fails_with([&] { GgufTokenizer::from_gguf(gguf(m)); }, ErrorCode::unsupported, needle);
  };
  EXPECT_TRUE(unsupported(with("tokenizer.ggml.model", str("rwkv")),
                          "tokenizer.ggml.model: unsupported vocabulary kind 'rwkv' (RWKV)"));
  EXPECT_TRUE(unsupported(with("tokenizer.ggml.model", str("plamo2")), "'gpt2' (byte-level BPE), 'llama'"));
  EXPECT_TRUE(unsupported(with("tokenizer.ggml.pre", str("qwen99")), "tokenizer.ggml.pre: pre-tokenizer 'qwen99'"));
  EXPECT_TRUE(unsupported(with("tokenizer.ggml.pre", str("qwen99")), "smollm, starcoder"));
  EXPECT_TRUE(fails(without("tokenizer.ggml.model"), "tokenizer.ggml.model"));
  EXPECT_TRUE(fails(without("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens"));
  EXPECT_TRUE(fails(without("tokenizer.ggml.merges"), "tokenizer.ggml.merges"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.tokens", i32s({1, 2})), "tokenizer.ggml.tokens"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.tokens", strings({})), "tokenizer.ggml.tokens: the vocabulary is empty"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.token_type", i32s({1, 1, 1})),
                    "tokenizer.ggml.token_type: 3 types for 262 tokens"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.token_type", i32s(std::vector<int32_t>(262, 9))),
                    "token 0 has type 9"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.merges", strings({"a b", "a zz"})),
                    "tokenizer.ggml.merges: merge 1 'a zz' names 'zz'"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.merges", strings({"ab"})), "merge 0 'ab' is not two tokens"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.merges", strings({"b c"})), "names 'bc'"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.bos_token_id", u32(262)),
                    "tokenizer.ggml.bos_token_id: id 262 is outside the vocabulary (262 tokens)"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.eot_token_id", u32(70000)), "tokenizer.ggml.eot_token_id"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.bos_token_id", str("1")), "tokenizer.ggml.bos_token_id"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.add_bos_token", u32(1)), "tokenizer.ggml.add_bos_token"));
  EXPECT_TRUE(fails(with("tokenizer.ggml.scores", i32s({1})), "tokenizer.ggml.scores: 1 scores for 262"));
  Metadata dup = tiny_vocab();
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(static_cast<uint8_t>(b)));
  for (const char* t : {"ab", "abc", "ab", "<c>", "<c><d>", "<u>"}) tokens.push_back(t);
  dup["tokenizer.ggml.tokens"] = strings(tokens);
  EXPECT_TRUE(fails(dup, "token 258 'ab' is also token 256"));
  Metadata byte = tiny_vocab();
  std::vector<int32_t> types(262, 1);
  types[256] = 6;
  byte["tokenizer.ggml.token_type"] = i32s(types);
  EXPECT_TRUE(fails(byte, "token 256 'ab' is a byte token (type 6) but not written <0xNN>"));
  Metadata no_bos = without("tokenizer.ggml.bos_token_id");
  no_bos["tokenizer.ggml.tokens"] = strings({"a"});
  no_bos["tokenizer.ggml.token_type"] = i32s({1});
  no_bos["tokenizer.ggml.merges"] = strings({});
  no_bos.erase("tokenizer.ggml.eos_token_id");
  no_bos["tokenizer.ggml.add_bos_token"] = boolean(true);
  EXPECT_TRUE(fails(no_bos, "tokenizer.ggml.add_bos_token: true, but there is no BOS token"));
}

// ------------------------------------------------------------------ Utf8StreamDecoder
TEST(Utf8StreamDecoder, HoldsBackSplitCharacters) {
  Utf8StreamDecoder d;
  const std::string smile = "\xF0\x9F\x98\x80";
  EXPECT_EQ(d.push(smile.substr(0, 1)), "");
  EXPECT_EQ(d.push(smile.substr(1, 2)), "");
  EXPECT_EQ(d.push(smile.substr(3) + "a\xC3"), smile + "a");
  EXPECT_EQ(d.push("\xA9"), "\xC3\xA9");
  EXPECT_EQ(d.flush(), "");
  EXPECT_EQ(d.push("plain"), "plain");
}

TEST(Utf8StreamDecoder, DiscardDropsAHeldBackCharacter) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("a\xF0\x9F"), "a");
  EXPECT_TRUE(d.holds_back());
  EXPECT_EQ(d.discard(), 2u);
  EXPECT_FALSE(d.holds_back());
  EXPECT_EQ(d.flush(), "");       // nothing left to replace
  EXPECT_EQ(d.push("\x98"), "\xEF\xBF\xBD");  // a continuation byte alone: it started over
  EXPECT_EQ(d.discard(), 0u);
}

TEST(Utf8StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("\x80"), r);                 // a lone continuation byte
  EXPECT_EQ(d.push("\xFF" "a"), r + "a");       // never valid
  EXPECT_EQ(d.push("\xC0\x80"), r + r);         // overlong: C0 cannot start a character
  EXPECT_EQ(d.push("\xE0\x80"), r + r);         // overlong three-byte form
  EXPECT_EQ(d.push("\xED\xA0\x80"), r + r + r); // a surrogate
  EXPECT_EQ(d.push("\xF4\x90\x80\x80"), r + r + r + r);  // beyond U+10FFFF
  EXPECT_EQ(d.push("\xE2\x82" "x"), r + "x");   // a character cut short: one U+FFFD
  EXPECT_EQ(d.push("\xF0\x9F\x98"), "");
  EXPECT_EQ(d.flush(), r);                      // what was held back
  EXPECT_EQ(d.flush(), "");
  EXPECT_EQ(d.push("\xC3\xA9"), "\xC3\xA9");    // starts over cleanly
}

TEST(Utf8StreamDecoder, AnyByteSplitOfAnyBytesIsValidUtf8) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      // Mostly bytes that form or break UTF-8 sequences.
      static const unsigned char pool[] = {'a', 0x80, 0xBF, 0xC2, 0xC3, 0xE0, 0xE2, 0xED,
                                           0xEF, 0xF0, 0xF4, 0xF5, 0x9F, 0xA0, 0x8F, 0xFF};
      bytes.push_back(static_cast<char>(pool[rng() % sizeof pool]));
    }
    Utf8StreamDecoder whole, split;
    std::string a = whole.push(bytes);
    a += whole.flush();  // after push: the operands of + may be evaluated in either order
    std::string b;
    for (char c : bytes) {
      std::string piece = split.push(std::string(1, c));
      ASSERT_TRUE(is_valid_utf8(piece));
      b += piece;
    }
    b += split.flush();
    ASSERT_TRUE(is_valid_utf8(a));
    ASSERT_EQ(a, b) << ::testing::PrintToString(bytes);
  }
}

}  // namespace
