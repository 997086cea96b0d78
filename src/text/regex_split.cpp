// llama.cpp's unicode_regex_split for patterns without a hand-written scanner, ported from its
// unicode.cpp (MIT): the category collapse, the pattern rewrite and the std::regex iteration.
#include "regex_split.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>

#include "bpe_unicode.hpp"
#include "vkformer/error.hpp"

namespace vkformer::text::bpe {

namespace {

struct Category {
  std::string_view name;
  char byte;              // what a code point >= 128 of this category collapses to
  std::string_view ascii; // the category's ASCII members as a class body (llama.cpp's table)
};
// llama.cpp's k_ucat_enum / k_ucat_cpt / k_ucat_map: the letter subcategories all read as L.
constexpr Category kCategories[] = {
    {"\\p{N}", '\xD1', "\x30-\x39"},
    {"\\p{L}", '\xD2', "\x41-\x5A\x61-\x7A"},
    {"\\p{P}", '\xD3', "\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D"},
    {"\\p{M}", '\xD4', ""},
    {"\\p{S}", '\xD5', "\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C\\\x7E"},
    {"\\p{Lu}", '\xD2', "\x41-\x5A\x61-\x7A"},
    {"\\p{Ll}", '\xD2', "\x41-\x5A\x61-\x7A"},
    {"\\p{Lt}", '\xD2', "\x41-\x5A\x61-\x7A"},
    {"\\p{Lm}", '\xD2', "\x41-\x5A\x61-\x7A"},
    {"\\p{Lo}", '\xD2', "\x41-\x5A\x61-\x7A"},
};

bool names_category(std::string_view regex) {
  for (const Category& c : kCategories)
    if (regex.find(c.name) != std::string_view::npos) return true;
  return false;
}

char collapse(char32_t cp) {
  if (cp < 128) return static_cast<char>(cp);
  const uint16_t f = char_flags(cp);
  if (f & kWhitespace) return '\x0B';
  if (f & kNumber) return '\xD1';
  if (f & kLetter) return '\xD2';
  if (f & kPunctuation) return '\xD3';
  if (f & kMark) return '\xD4';
  if (f & kSymbol) return '\xD5';
  return '\xD0';
}

// The pattern with each \p{..} replaced by its collapsed class (inside [] only the members).
std::string collapse_pattern(std::string_view regex) {
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] == '[' && (i == 0 || regex[i - 1] != '\\')) {
      out += '[';
      inside = true;
      continue;
    }
    if (inside && regex[i] == ']' && regex[i - 1] != '\\') {
      out += ']';
      inside = false;
      continue;
    }
    if (regex[i] == '\\' && i + 3 < regex.size() && regex[i + 1] == 'p' && regex[i + 2] == '{') {
      size_t close = regex.find('}', i + 3);
      if (close != std::string_view::npos && close <= i + 10) {
        std::string_view name = regex.substr(i, close - i + 1);
        const Category* found = nullptr;
        for (const Category& c : kCategories)
          if (c.name == name) found = &c;
        if (found) {
          if (!inside) out += '[';
          out += found->byte;
          out += found->ascii;
          if (!inside) out += ']';
          i = close;
          continue;
        }
      }
    }
    out += regex[i];
  }
  return out;
}

#ifdef _MSC_VER
constexpr auto kFlags = std::regex_constants::ECMAScript;
#else
constexpr auto kFlags = std::regex_constants::optimize | std::regex_constants::nosubs;
#endif

// Each pattern is compiled once (the pre-tokenizer tables are static, so there are few).
struct Compiled {
  bool collapsed = false;
  std::regex narrow;
  std::wregex wide;
};

const Compiled& compiled(std::string_view regex) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Compiled>, std::less<>> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(regex);
  if (it != cache.end()) return *it->second;
  auto c = std::make_unique<Compiled>();
  try {
    if (names_category(regex)) {
      c->collapsed = true;
      c->narrow = std::regex(collapse_pattern(regex), kFlags);
    } else {
      std::u32string cps = decode_lenient(regex);
      c->wide = std::wregex(std::wstring(cps.begin(), cps.end()), kFlags);
    }
  } catch (const std::regex_error& e) {
    throw Error(ErrorCode::internal,
                "pre-tokenizer regex '" + std::string(regex) + "' does not compile: " + e.what());
  }
  return *cache.emplace(std::string(regex), std::move(c)).first->second;
}

template <typename CharT>
void split_stl(const std::basic_string<CharT>& text, const std::basic_regex<CharT>& expr,
               std::vector<size_t>& out) {
  using It = typename std::basic_string<CharT>::const_iterator;
  std::regex_iterator<It> it(text.begin(), text.end(), expr), end;
  size_t start = 0;
  for (; it != end; ++it) {
    const auto& m = *it;
    const size_t pos = static_cast<size_t>(m.position());
    if (pos > start) out.push_back(pos - start);
    out.push_back(static_cast<size_t>(m.length()));
    start = pos + static_cast<size_t>(m.length());
  }
  if (start < text.size()) out.push_back(text.size() - start);
}

// A coarse class of a code point, for finding long runs: whitespace, letter, number, mark or
// anything else.
char run_class(char32_t cp) {
  const uint16_t f = char_flags(cp);
  if (f & kWhitespace) return 's';
  if (f & kLetter) return 'L';
  if (f & kNumber) return 'N';
  if (f & kMark) return 'M';
  return 'o';
}

void split_piece(std::u32string_view piece, const Compiled& c, std::vector<size_t>& out);

}  // namespace

// libstdc++'s regex matcher recurses once per repeated character, so one match of a long run
// (20,000 letters overflow an 8 MB stack; llama.cpp crashes there) would crash. Runs of one
// class longer than kMaxRun are cut every kMaxRun characters and the parts matched apart: the
// ids differ from llama.cpp's only for texts with such runs (where it may crash), and the
// recursion stays within about 1 MB, less than any thread's stack.
constexpr size_t kMaxRun = 1024;

void split_by_regex(std::u32string_view piece, std::string_view regex, std::vector<size_t>& out) {
  const Compiled& c = compiled(regex);
  size_t start = 0, run = 0;
  char last = 0;
  for (size_t i = 0; i < piece.size(); ++i) {
    const char k = run_class(piece[i]);
    run = k == last ? run + 1 : 1;
    last = k;
    if (run > kMaxRun) {  // cut before i: the run so far is kMaxRun long
      split_piece(piece.substr(start, i - start), c, out);
      start = i;
      run = 1;
    }
  }
  split_piece(piece.substr(start), c, out);
}

namespace {

void split_piece(std::u32string_view piece, const Compiled& c, std::vector<size_t>& out) {
  if (piece.empty()) return;
  if (c.collapsed) {
    std::string text(piece.size(), '\0');
    for (size_t i = 0; i < piece.size(); ++i) text[i] = collapse(piece[i]);
    split_stl(text, c.narrow, out);
  } else {
    std::wstring text(piece.begin(), piece.end());
    for (wchar_t& ch : text)
      if (static_cast<char32_t>(ch) > 0x7F && (char_flags(static_cast<char32_t>(ch)) & kWhitespace))
        ch = 0x0B;
    split_stl(text, c.wide, out);
  }
}

}  // namespace

}  // namespace vkformer::text::bpe
