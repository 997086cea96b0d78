#include "bert_normalizer.hpp"

#include <utf8proc.h>

#include <vector>

#include "bert_chars.hpp"
#include "utf8.hpp"
#include "vkformer/error.hpp"

namespace vkformer::text {

namespace {

std::u32string clean_text(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || is_bert_control(c)) continue;
    out.push_back(is_bert_whitespace(c) ? U' ' : c);
  }
  return out;
}

std::u32string split_cjk(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (is_cjk_ideograph(c)) {
      out += U' ';
      out += c;
      out += U' ';
    } else {
      out += c;
    }
  }
  return out;
}

// Canonical decomposition with canonical ordering of combining marks, by utf8proc.
std::u32string nfd(std::u32string_view text) {
  std::string utf8 = encode_utf8(text);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  auto len = static_cast<utf8proc_ssize_t>(utf8.size());
  std::vector<utf8proc_int32_t> buf(text.size() + 8);
  for (;;) {
    utf8proc_ssize_t n = utf8proc_decompose(
        bytes, len, buf.data(), static_cast<utf8proc_ssize_t>(buf.size()), UTF8PROC_DECOMPOSE);
    if (n < 0)
      throw Error(ErrorCode::internal, std::string("tokenizer: NFD failed: ") + utf8proc_errmsg(n));
    if (static_cast<size_t>(n) <= buf.size()) return std::u32string(buf.begin(), buf.begin() + n);
    buf.resize(static_cast<size_t>(n));  // too small: n is the size needed
  }
}

std::u32string strip_accents(std::u32string_view text) {
  std::u32string out;
  for (char32_t c : nfd(text))
    if (!is_nonspacing_mark(c)) out += c;
  return out;
}

std::u32string lowercase(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    // Rust's char::to_lowercase uses the full mapping; U+0130 is the only code point whose full
    // lower case is longer than utf8proc's simple one (SpecialCasing.txt, unconditional).
    if (c == 0x130) {
      out += U"i\u0307";
      continue;
    }
    out += static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  }
  return out;
}

}  // namespace

std::u32string bert_normalize(std::u32string_view text, const WordPieceConfig& config) {
  std::u32string s(text);
  if (config.clean_text) s = clean_text(s);
  if (config.handle_chinese_chars) s = split_cjk(s);
  if (config.strip_accents.value_or(config.lowercase)) s = strip_accents(s);
  if (config.lowercase) s = lowercase(s);
  return s;
}

}  // namespace vkformer::text
