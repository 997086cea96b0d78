#pragma once
// UTF-8 <-> code points for the tokenizer, through utf8proc (which rejects overlong forms,
// surrogates and code points beyond U+10FFFF).
#include <string>
#include <string_view>

namespace vkformer::text {

// The code points of `text`. Throws invalid_argument naming `what` and the byte offset of the
// first sequence that is not UTF-8.
std::u32string decode_utf8(std::string_view text, std::string_view what);

void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view text);

}  // namespace vkformer::text
