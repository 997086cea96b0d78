// Every vocabulary-only GGUF that llama.cpp ships in its models/ folder, against llama.cpp's own
// test vectors (models/ggml-vocab-*.gguf.inp / .out, which its test-tokenizer-0 checks with
// add_special = false, parse_special = false): each vocabulary either gives exactly llama.cpp's
// ids for every text, or is refused with an error that names its unsupported kind.
// The files come from scripts/fetch_llama_vocabs.sh (the llama-cpp-python sdist). Host only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/gguf_tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using vkformer::GgufTokenizer;
using vkformer::ErrorCode;
using vkformer::testing::fails_with;
using vkformer::testing::FetchedModel;

// Each vocabulary is loaded once for all tests (the large ones take a second or more).
const GgufTokenizer& vocab(const std::string& name) {
  static std::map<std::string, GgufTokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end())
    it = loaded.emplace(name, GgufTokenizer::load(vkformer::testing::llama_vocabs_dir().path / ("ggml-vocab-" + name + ".gguf"))).first;
  return it->second;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

// test-tokenizer-0's read_tests: texts separated by "\n__ggml_vocab_test__\n", one line of ids
// per text.
std::vector<Vector> read_vectors(const fs::path& gguf) {
  const std::string inp = read_all(gguf.string() + ".inp");
  const std::string out = read_all(gguf.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Vector> v;
  for (size_t pos = 0; pos < inp.size();) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      v.push_back({inp.substr(pos), {}});
      break;
    }
    v.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    if (i >= v.size()) throw std::runtime_error(gguf.string() + ".out has more lines than texts");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v[i].ids.push_back(id);
  }
  if (i != v.size()) throw std::runtime_error(gguf.string() + ": texts and lines differ in number");
  return v;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// The vocabularies with test vectors that vkformer tokenizes (all of them but bert-bge).
class LlamaCppVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVectors, EveryTextGivesLlamaCppsIds) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  const fs::path gguf = dir.path / ("ggml-vocab-" + GetParam() + ".gguf");
  const GgufTokenizer& tok = vocab(GetParam());
  const auto vectors = read_vectors(gguf);
  ASSERT_GE(vectors.size(), 40u);
  size_t mismatches = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const auto got = tok.encode(vectors[i].text, false, false);
    if (got != vectors[i].ids && ++mismatches <= 10)
      ADD_FAILURE() << GetParam() << " text " << i << " " << ::testing::PrintToString(vectors[i].text)
                    << "\n got " << show(got) << "\nwant " << show(vectors[i].ids);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << vectors.size();
  RecordProperty("vectors", static_cast<int>(vectors.size()));
}

INSTANTIATE_TEST_SUITE_P(Shipped, LlamaCppVectors,
                         ::testing::Values("command-r", "deepseek-coder", "deepseek-llm", "falcon",
                                           "gemma-4", "gpt-2", "llama-bpe", "llama-spm", "mpt",
                                           "phi-3", "qwen2", "qwen35", "refact", "starcoder"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// SentencePiece and SentencePiece-style BPE decode what they encoded back to the text (every
// byte has a token), and so does streaming the tokens through a Utf8StreamDecoder.
TEST(LlamaCppVocabs, SentencePieceRoundTrips) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  for (const char* name : {"llama-spm", "gemma-4"}) {
    const fs::path gguf = dir.path / ("ggml-vocab-" + std::string(name) + ".gguf");
    const GgufTokenizer& tok = vocab(name);
    for (const Vector& v : read_vectors(gguf)) {
      const auto ids = tok.encode(v.text, false, false);
      EXPECT_EQ(tok.decode(ids), v.text) << name;
      vkformer::Utf8StreamDecoder stream;
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(tok.token_bytes(id));
      streamed += stream.flush();
      // The stream keeps the space SentencePiece (llama-spm, not gemma-4) put first; decode()
      // drops it.
      const bool prefix = std::string(name) == "llama-spm" && !v.text.empty();
      EXPECT_EQ(streamed, (prefix ? " " : "") + v.text) << name;
    }
  }
}

// Pre-tokenizers run through std::regex take long runs of one class without overflowing the
// stack (libstdc++'s matcher recurses per repeated character; llama.cpp crashes on these texts):
// 40,000 bytes of letters, accented letters, digits, punctuation and spaces encode and decode
// back.
TEST(LlamaCppVocabs, LongRunsThroughRegexPreTokenizers) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  for (const char* name : {"deepseek-llm", "deepseek-coder"}) {
    const GgufTokenizer& tok = vocab(name);
    for (const std::string unit : {"abcdefgh", "\xC3\xA9t\xC3\xA9", "1234", "!?", "  "}) {
      std::string text;
      while (text.size() < 40000) text += unit;  // unguarded, 30,000 letters crashed
      const auto ids = tok.encode(text, false, false);
      EXPECT_EQ(tok.decode(ids), text) << name << " " << unit;
    }
  }
}

// The shipped vocabularies without test vectors load (aquila, gpt-neox: "gpt2" without a
// pre-tokenizer; baichuan: SentencePiece).
TEST(LlamaCppVocabs, TheOthersLoad) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  for (const char* name : {"aquila", "gpt-neox", "baichuan"}) {
    const GgufTokenizer tok = GgufTokenizer::load(dir.path / ("ggml-vocab-" + std::string(name) + ".gguf"));
    EXPECT_GT(tok.encode("Hello world", false).size(), 0u) << name;
  }
}

// Kinds vkformer does not tokenize are named in the error.
TEST(LlamaCppVocabs, UnsupportedKindsAreNamed) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  EXPECT_TRUE(fails_with([&] { GgufTokenizer::load(dir.path / "ggml-vocab-bert-bge.gguf"); },
                         ErrorCode::unsupported,
                         "tokenizer.ggml.model: unsupported vocabulary kind 'bert' (WordPiece)"));
  EXPECT_TRUE(fails_with([&] { GgufTokenizer::load(dir.path / "ggml-vocab-nomic-bert-moe.gguf"); },
                         ErrorCode::unsupported,
                         "unsupported vocabulary kind 't5' (SentencePiece Unigram)"));
}

// Every shipped vocabulary is covered by one of the tests above.
TEST(LlamaCppVocabs, EveryShippedVocabularyIsCovered) {
  const FetchedModel& dir = vkformer::testing::llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    std::string f = e.path().filename().string();
    if (f.starts_with("ggml-vocab-") && f.ends_with(".gguf")) names.push_back(f.substr(11, f.size() - 16));
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"aquila", "baichuan", "bert-bge", "command-r",
                                             "deepseek-coder", "deepseek-llm", "falcon", "gemma-4",
                                             "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
                                             "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact",
                                             "starcoder"}));
}

}  // namespace
