// Utf8StreamDecoder follows the WHATWG UTF-8 decoder (encoding.spec.whatwg.org): the allowed
// range of each byte after a lead byte excludes overlong forms, surrogates and code points past
// U+10FFFF, so what it passes on is always valid UTF-8.
#include "vkformer/gguf_tokenizer.hpp"

namespace vkformer {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
}

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + pending_.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (needed_ == 0) {
      ++i;
      lower_ = 0x80;
      upper_ = 0xBF;
      if (b < 0x80) {
        out.push_back(static_cast<char>(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        needed_ = 2;
        if (b == 0xE0) lower_ = 0xA0;  // overlong
        if (b == 0xED) upper_ = 0x9F;  // surrogates
      } else if (b >= 0xF0 && b <= 0xF4) {
        needed_ = 3;
        if (b == 0xF0) lower_ = 0x90;  // overlong
        if (b == 0xF4) upper_ = 0x8F;  // beyond U+10FFFF
      } else {
        out += kReplacement;
        continue;
      }
      if (needed_ > 0) pending_.assign(1, static_cast<char>(b));
      continue;
    }
    if (b < lower_ || b > upper_) {
      // The character so far cannot be completed: one U+FFFD for it, and this byte starts over.
      pending_.clear();
      needed_ = 0;
      out += kReplacement;
      continue;
    }
    ++i;
    lower_ = 0x80;
    upper_ = 0xBF;
    pending_.push_back(static_cast<char>(b));
    if (--needed_ == 0) {
      out += pending_;
      pending_.clear();
    }
  }
  return out;
}

std::string Utf8StreamDecoder::flush() {
  std::string out;
  if (needed_ > 0) out = kReplacement;
  pending_.clear();
  needed_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
  return out;
}

size_t Utf8StreamDecoder::discard() {
  const size_t dropped = pending_.size();
  flush();
  return dropped;
}

}  // namespace vkformer
