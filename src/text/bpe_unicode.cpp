#include "bpe_unicode.hpp"

#include <utf8proc.h>

#include <array>

namespace vkformer::text::bpe {

namespace {

// Length of a sequence from its lead byte's high nibble; continuation bytes (10xx) count as 1
// here and are then refused, as in llama.cpp.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC0) return 0;  // a continuation byte cannot start a sequence
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 0;
}

}  // namespace

std::u32string decode_lenient(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t i = 0; i < bytes.size();) {
    size_t n = sequence_length(b[i]);
    bool ok = n > 0 && i + n <= bytes.size();
    char32_t cp = 0;
    if (ok) {
      static constexpr uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
      cp = b[i] & kLeadMask[n];
      for (size_t k = 1; k < n && ok; ++k) {
        ok = (b[i + k] & 0xC0) == 0x80;
        cp = (cp << 6) | (b[i + k] & 0x3F);
      }
      ok = ok && cp <= 0x10FFFF;
    }
    if (!ok) {
      out.push_back(U'\uFFFD');
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

void append_utf8_lenient(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint16_t char_flags(char32_t cp) {
  if (cp > 0x10FFFF) return kUndefined;
  uint16_t flags = 0;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CN:
      // Unicode 15.1 assigned these after utf8proc 2.8's Unicode 15.0; llama.cpp's table has
      // them (ideographic description characters So, CJK extension I Lo).
      if ((cp >= 0x2FFC && cp <= 0x2FFF) || cp == 0x31EF) flags = kSymbol;
      else if (cp >= 0x2EBF0 && cp <= 0x2EE5D) flags = kLetter;
      else flags = kUndefined;
      break;
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: flags = kLetter; break;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
      flags = kMark; break;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      flags = kNumber; break;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: flags = kPunctuation; break;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO: flags = kSymbol; break;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      flags = kSeparator; break;
    default: flags = kControl; break;  // Cc, Cf, Cs, Co
  }
  // Unicode's White_Space property, the set llama.cpp uses for \s (not Python's: U+001C..U+001F
  // are not in it).
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      flags |= kWhitespace; break;
    default:
      if (cp >= 0x2000 && cp <= 0x200A) flags |= kWhitespace;
  }
  return flags;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 324> to_byte;  // indexed by code point; the map's image is below U+0144
  ByteMap() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      append_utf8_lenient(to_unicode[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  const ByteMap& m = byte_map();
  if (cp >= m.to_byte.size() || m.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(m.to_byte[cp]);
}

}  // namespace vkformer::text::bpe
