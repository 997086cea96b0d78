// llama.cpp's regex lists rewritten as scanners. Two kinds of step:
//  - the GPT-2 and Llama 3 word patterns, which llama.cpp itself runs as hand-written scanners
//    (unicode.cpp); these follow the same decisions, including at the end of a piece, where
//    lookahead sees nothing (so a run of spaces ending a piece stays whole);
//  - character-class patterns llama.cpp gives std::regex over a "collapsed" text (each code
//    point >= 128 replaced by a byte for its category): runs or single characters of a class,
//    with the text between matches kept as pieces of its own.
#include "bpe_pre_tokenizer.hpp"

#include <array>

#include "bpe_unicode.hpp"
#include "regex_split.hpp"

namespace vkformer::text::bpe {

namespace {

constexpr uint16_t kWordClasses = kWhitespace | kLetter | kNumber;

// One piece being cut: code points [0, size()), with nothing (flags 0) beyond either end.
class Scanner {
 public:
  Scanner(std::u32string_view s, std::vector<size_t>& out) : s_(s), out_(out) {}
  size_t size() const { return s_.size(); }
  char32_t at(size_t i) const { return i < s_.size() ? s_[i] : 0xFFFFFFFF; }
  uint16_t flags(size_t i) const { return i < s_.size() ? char_flags(s_[i]) : 0; }
  // Ends the current word at `end` (nothing when it would be empty).
  void cut(size_t end) {
    if (end > start_) out_.push_back(end - start_);
    start_ = end;
  }

 private:
  std::u32string_view s_;
  std::vector<size_t>& out_;
  size_t start_ = 0;
};

char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// The length of a contraction ('s 't 'm 'd 're 've 'll) at `pos`, or 0.
size_t contraction(const Scanner& p, size_t pos, bool any_case) {
  if (p.at(pos) != '\'' || pos + 1 >= p.size()) return 0;
  auto low = [&](size_t i) { return any_case ? ascii_lower(p.at(i)) : p.at(i); };
  char32_t a = low(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= p.size()) return 0;
  char32_t b = low(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// A whitespace run at `pos` not taken by an earlier alternative: \s+(?!\S) leaves its last
// character to the next word when something follows inside the piece, else \s+ takes it all.
size_t whitespace_end(const Scanner& p, size_t pos) {
  size_t n = 0;
  while (p.flags(pos + n) & kWhitespace) ++n;
  if (n > 1 && pos + n < p.size()) return pos + n - 1;
  return pos + (n > 0 ? n : 1);
}

void split_gpt2(std::u32string_view s, std::vector<size_t>& out) {
  Scanner p(s, out);
  for (size_t pos = 0; pos < p.size();) {
    if (size_t n = contraction(p, pos, false)) {
      p.cut(pos += n);
      continue;
    }
    const bool space = p.at(pos) == ' ';
    const uint16_t f = space ? p.flags(pos + 1) : p.flags(pos);
    if (f & (kLetter | kNumber)) {  // ' ?\p{L}+' or ' ?\p{N}+'
      const uint16_t cls = f & kLetter ? kLetter : kNumber;
      pos += space;
      while (p.flags(pos) & cls) ++pos;
    } else if (!(f & kWordClasses) && f != 0) {  // ' ?[^\s\p{L}\p{N}]+'
      pos += space;
      while (!(p.flags(pos) & kWordClasses) && p.flags(pos) != 0) ++pos;
    } else {
      pos = whitespace_end(p, pos);
    }
    p.cut(pos);
  }
}

// Llama 3's pattern; max_digits 3 (llama3) or 1 (qwen2); with marks, \p{M} joins \p{L} in
// the letter runs and leaves the punctuation runs (qwen35).
void split_llama3(std::u32string_view s, std::vector<size_t>& out, size_t max_digits,
                  bool marks = false) {
  Scanner p(s, out);
  const uint16_t letters = marks ? (kLetter | kMark) : kLetter;
  const uint16_t word_classes = marks ? (kWordClasses | kMark) : kWordClasses;
  auto is_newline = [](char32_t c) { return c == '\r' || c == '\n'; };
  for (size_t pos = 0; pos < p.size();) {
    if (size_t n = contraction(p, pos, true)) {
      p.cut(pos += n);
      continue;
    }
    const char32_t c = p.at(pos);
    const uint16_t f = p.flags(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_newline(c) && !(f & kNumber) && ((f & letters) || (p.flags(pos + 1) & letters))) {
      ++pos;
      while (p.flags(pos) & letters) ++pos;
      p.cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}, repeated over a longer run
    if (f & kNumber) {
      size_t first = pos;
      while (p.flags(pos) & kNumber) {
        if (++pos - first >= max_digits) {
          p.cut(pos);
          first = pos;
        }
      }
      p.cut(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (llama.cpp tests the first character's flags, not the
    // following one's, for being inside the piece, so a lone trailing space lands here too)
    const uint16_t f2 = c == ' ' ? p.flags(pos + 1) : f;
    if (!(f2 & word_classes) && f != 0) {
      pos += c == ' ';
      while (!(p.flags(pos) & word_classes) && p.flags(pos) != 0) ++pos;
      while (is_newline(p.at(pos))) ++pos;
      p.cut(pos);
      continue;
    }
    // \s*[\r\n]+ : through the last line break of the whitespace run
    size_t n = 0, after_newline = 0;
    for (; p.flags(pos + n) & kWhitespace; ++n)
      if (is_newline(p.at(pos + n))) after_newline = pos + n + 1;
    pos = after_newline > 0 ? after_newline : whitespace_end(p, pos);
    p.cut(pos);
  }
}

// The ASCII characters in llama.cpp's stand-in for \p{P}, with the default pattern's
// $ + < = > ^ ~ | : every ASCII punctuation or symbol except the backtick.
bool ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x5F) ||
         (c >= 0x7B && c <= 0x7E);
}

// Character classes as the collapsed text sees them: ASCII by value, the rest by category
// (whitespace first).
bool class_number(char32_t c) { return c < 128 ? (c >= '0' && c <= '9') : (char_flags(c) & kNumber); }
bool class_punct(char32_t c) {
  if (c < 128) return ascii_punct(c);
  uint16_t f = char_flags(c);
  return !(f & kWhitespace) && (f & kPunctuation);
}
bool class_punct_tick(char32_t c) { return c == '`' || class_punct(c); }

// Matches of a character class, alone or as maximal runs, and the text between them.
template <typename Pred>
void split_class(std::u32string_view s, std::vector<size_t>& out, Pred pred, bool runs) {
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    if (!pred(s[i])) {
      ++i;
      continue;
    }
    if (i > start) out.push_back(i - start);
    size_t j = i + 1;
    if (runs)
      while (j < s.size() && pred(s[j])) ++j;
    out.push_back(j - i);
    start = i = j;
  }
  if (s.size() > start) out.push_back(s.size() - start);
}

// [0-9][0-9][0-9], leftmost first, without overlaps.
void split_ascii_digits3(std::u32string_view s, std::vector<size_t>& out) {
  auto digit = [&](size_t i) { return s[i] >= '0' && s[i] <= '9'; };
  size_t start = 0;
  for (size_t i = 0; i + 3 <= s.size();) {
    if (!(digit(i) && digit(i + 1) && digit(i + 2))) {
      ++i;
      continue;
    }
    if (i > start) out.push_back(i - start);
    out.push_back(3);
    start = i = i + 3;
  }
  if (s.size() > start) out.push_back(s.size() - start);
}

// [^\n]+|[\n]+: runs of newlines and runs of anything else.
void split_newlines(std::u32string_view s, std::vector<size_t>& out) {
  for (size_t i = 0; i < s.size();) {
    const bool newline = s[i] == '\n';
    size_t j = i;
    while (j < s.size() && (s[j] == '\n') == newline) ++j;
    out.push_back(j - i);
    i = j;
  }
}

void apply(const Step& step, std::u32string_view piece, std::vector<size_t>& out) {
  switch (step.kind) {
    case SplitStep::gpt2: return split_gpt2(piece, out);
    case SplitStep::llama3: return split_llama3(piece, out, 3);
    case SplitStep::qwen2: return split_llama3(piece, out, 1);
    case SplitStep::each_number: return split_class(piece, out, class_number, false);
    case SplitStep::number_runs: return split_class(piece, out, class_number, true);
    case SplitStep::punct_runs: return split_class(piece, out, class_punct, true);
    case SplitStep::punct_runs_tick: return split_class(piece, out, class_punct_tick, true);
    case SplitStep::ascii_digits3: return split_ascii_digits3(piece, out);
    case SplitStep::qwen35: return split_llama3(piece, out, 1, true);
    case SplitStep::newlines: return split_newlines(piece, out);
    case SplitStep::regex: return split_by_regex(piece, step.regex, out);
  }
}

struct NamedSpec {
  std::string_view name;
  const PreTokenizerSpec* spec;
};

using S = SplitStep;
const PreTokenizerSpec kDefault{"default", {S::punct_runs, S::gpt2, S::number_runs, S::ascii_digits3}};
const PreTokenizerSpec kGpt2{"gpt2", {S::gpt2}};
const PreTokenizerSpec kStarcoder{"starcoder", {S::each_number, S::gpt2}};
const PreTokenizerSpec kLlama3{"llama3", {S::llama3}, true, true};
const PreTokenizerSpec kDbrx{"dbrx", {S::llama3}};
const PreTokenizerSpec kGlm4{"glm4", {S::llama3}, true};
const PreTokenizerSpec kQwen2{"qwen2", {S::qwen2}};
const PreTokenizerSpec kQwen35{"qwen35", {S::qwen35}};
const PreTokenizerSpec kFalcon{"falcon", {S::punct_runs_tick, S::gpt2, S::ascii_digits3}};
const PreTokenizerSpec kGemma4{"gemma4", {S::newlines}, false, false, true};

// The patterns llama.cpp runs through std::regex, copied from its llm_tokenizer_bpe (those it
// has a scanner for are the scanner steps).
const PreTokenizerSpec kDeepseekLlm{"deepseek-llm",
    {"[\r\n]",
     "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
     "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
     "\\s+$",
     "[一-龥ࠀ-一가-퟿]+",
     "\\p{N}+"},
    false, false};
const PreTokenizerSpec kDeepseekCoder{"deepseek-coder",
    {"[\r\n]",
     "\\s?\\p{L}+",
     "\\s?\\p{P}+",
     "[一-龥ࠀ-一가-퟿]+",
     "\\p{N}"},
    false, false};
const PreTokenizerSpec kDeepseek3{"deepseek-v3",
    {"\\p{N}{1,3}",
     "[一-龥぀-ゟ゠-ヿ]+",
     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kSpark25{"spark2_5",
    {"\\p{N}{1,3}",
     "[一-龥぀-ゟ゠-ヿ]+",
     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
     "\\p{N}"},
    false, false};
const PreTokenizerSpec kYoutu{"youtu",
    {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
     "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    true, false};
const PreTokenizerSpec kPoro{"poro",
    {" ?[^(\\s|.,!?…。，、।۔،)]+"},
    false, false};
const PreTokenizerSpec kViking{"viking",
    {" ?[^(\\s|.,!?…。，、।۔،)]+",
     "\\p{N}"},
    false, false};
const PreTokenizerSpec kTekken{"tekken",
    {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    true, true};
const PreTokenizerSpec kChameleon{"chameleon",
    {"<sentinel:[0-9]+>",
     "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
     "([\\t\\n]|    |  )",
     "\\p{N}",
     "[\\p{P}!-/:-@\\[-`{-~]",
     S::gpt2},
    false, true};
const PreTokenizerSpec kGpt4o{"gpt-4o",
    {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kGraniteEmbMulti{"granite-embed-multi",
    {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    true, false};
const PreTokenizerSpec kSuperbpe{"superbpe",
    {"\\p{N}+",
     "(?=(\\d{3})+(?!\\d))"},
    false, false};
const PreTokenizerSpec kBailingmoe{"bailingmoe",
    {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kSeedCoder{"seed-coder",
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kUfakzeka{"ufakzeka",
    {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kExaoneMoe{"exaone-moe",
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
    false, false};
const PreTokenizerSpec kMinicpm5{"minicpm5",
    {"\\p{N}{1,3}",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    true, false};
const PreTokenizerSpec kJais2{"jais-2",
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"},
    false, false};
const PreTokenizerSpec kLaguna{"laguna",
    {S::newlines,
     S::qwen2},
    false, false};

// llama.cpp's names for each (llama-vocab.cpp). Not here: names whose models need per-token
// strip rules or other special cases llama.cpp keys on the model name (jina-v2-*, modern-bert),
// those with a BOS token llama.cpp removes (chatglm-bpe) and those with hand-written scanners
// not ported (kimi-k2, afmoe, tiny_aya, cohere2moe, whitespace).
const std::array kNames = {
    NamedSpec{"default", &kDefault},
    NamedSpec{"gpt-2", &kGpt2}, NamedSpec{"phi-2", &kGpt2}, NamedSpec{"jina-es", &kGpt2},
    NamedSpec{"jina-de", &kGpt2}, NamedSpec{"gigachat", &kGpt2}, NamedSpec{"a.x-4.0", &kGpt2},
    NamedSpec{"mellum", &kGpt2}, NamedSpec{"jina-v1-en", &kGpt2},
    NamedSpec{"roberta-bpe", &kGpt2}, NamedSpec{"mpt", &kGpt2}, NamedSpec{"olmo", &kGpt2},
    NamedSpec{"jais", &kGpt2}, NamedSpec{"trillion", &kGpt2},
    NamedSpec{"granite-docling", &kGpt2}, NamedSpec{"exaone4", &kGpt2},
    NamedSpec{"smollm", &kStarcoder}, NamedSpec{"starcoder", &kStarcoder},
    NamedSpec{"refact", &kStarcoder}, NamedSpec{"command-r", &kStarcoder},
    NamedSpec{"codeshell", &kStarcoder}, NamedSpec{"exaone", &kStarcoder},
    NamedSpec{"minerva-7b", &kStarcoder}, NamedSpec{"mellum2", &kStarcoder},
    NamedSpec{"llama-bpe", &kLlama3}, NamedSpec{"llama3", &kLlama3},
    NamedSpec{"llama-v3", &kLlama3}, NamedSpec{"falcon3", &kLlama3},
    NamedSpec{"falcon-h1", &kLlama3}, NamedSpec{"pixtral", &kLlama3},
    NamedSpec{"midm-2.0", &kLlama3}, NamedSpec{"lfm2", &kLlama3},
    NamedSpec{"jina-v5-nano", &kLlama3},
    NamedSpec{"dbrx", &kDbrx}, NamedSpec{"smaug-bpe", &kDbrx},
    NamedSpec{"glm4", &kGlm4}, NamedSpec{"glm5", &kGlm4},
    NamedSpec{"qwen2", &kQwen2}, NamedSpec{"deepseek-r1-qwen", &kQwen2},
    NamedSpec{"kormo", &kQwen2}, NamedSpec{"f2llmv2", &kQwen2}, NamedSpec{"megrez", &kQwen2},
    NamedSpec{"stablelm2", &kQwen2}, NamedSpec{"hunyuan", &kQwen2},
    NamedSpec{"solar-open", &kQwen2}, NamedSpec{"grok-2", &kQwen2},
    NamedSpec{"qwen35", &kQwen35},
    NamedSpec{"falcon", &kFalcon},
    NamedSpec{"gemma4", &kGemma4}, NamedSpec{"granite-embed-multi-311m", &kGemma4},
    NamedSpec{"deepseek-llm", &kDeepseekLlm}, NamedSpec{"deepseek-coder", &kDeepseekCoder},
    NamedSpec{"deepseek-v3", &kDeepseek3}, NamedSpec{"hunyuan-dense", &kDeepseek3},
    NamedSpec{"joyai-llm", &kDeepseek3}, NamedSpec{"hy_v4", &kDeepseek3},
    NamedSpec{"spark2_5", &kSpark25}, NamedSpec{"youtu", &kYoutu},
    NamedSpec{"poro-chat", &kPoro}, NamedSpec{"bloom", &kPoro}, NamedSpec{"gpt3-finnish", &kPoro},
    NamedSpec{"viking", &kViking}, NamedSpec{"tekken", &kTekken},
    NamedSpec{"chameleon", &kChameleon},
    NamedSpec{"gpt-4o", &kGpt4o}, NamedSpec{"llama4", &kGpt4o}, NamedSpec{"kanana2", &kGpt4o},
    NamedSpec{"talkie", &kGpt4o}, NamedSpec{"minimax-m2", &kGpt4o},
    NamedSpec{"granite-embed-multi-97m", &kGraniteEmbMulti},
    NamedSpec{"superbpe", &kSuperbpe},
    NamedSpec{"bailingmoe", &kBailingmoe}, NamedSpec{"bailingmoe2", &kBailingmoe},
    NamedSpec{"llada-moe", &kBailingmoe},
    NamedSpec{"seed-coder", &kSeedCoder}, NamedSpec{"ufakzeka", &kUfakzeka},
    NamedSpec{"exaone-moe", &kExaoneMoe}, NamedSpec{"minicpm5", &kMinicpm5},
    NamedSpec{"jais-2", &kJais2}, NamedSpec{"laguna", &kLaguna},
};

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
  if (name.empty()) return &kDefault;
  for (const NamedSpec& n : kNames)
    if (n.name == name) return n.spec;
  return nullptr;
}

std::string supported_pre_tokenizers() {
  std::string out;
  for (const NamedSpec& n : kNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

std::vector<size_t> pre_tokenize(std::u32string_view text, const std::vector<Step>& steps) {
  std::vector<size_t> pieces;
  if (!text.empty()) pieces.push_back(text.size());
  std::vector<size_t> next;
  for (const Step& step : steps) {
    next.clear();
    size_t start = 0;
    for (size_t len : pieces) {
      apply(step, text.substr(start, len), next);
      start += len;
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace vkformer::text::bpe
