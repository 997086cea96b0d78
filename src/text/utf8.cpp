#include "utf8.hpp"

#include <utf8proc.h>

#include <cstdio>

#include "vkformer/error.hpp"

namespace vkformer::text {

std::u32string decode_utf8(std::string_view text, std::string_view what) {
  std::u32string out;
  out.reserve(text.size());
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n =
        utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0 || cp < 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(bytes[i]));
      throw Error(ErrorCode::invalid_argument,
                  std::string(what) + ": the text is not valid UTF-8: byte " + byte +
                      " at byte offset " + std::to_string(i) + " does not start a valid sequence");
    }
    out.push_back(static_cast<char32_t>(cp));
    i += static_cast<size_t>(n);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

}  // namespace vkformer::text
