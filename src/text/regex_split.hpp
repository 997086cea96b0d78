#pragma once
// Pre-tokenizer regexes run the way llama.cpp runs those it has no hand-written scanner for
// (unicode.cpp, unicode_regex_split): with the standard library's regex engine, so that its
// ECMAScript semantics (leftmost alternative, not longest) and its quirks are the same.
//  - A pattern that names a Unicode category (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}, \p{Lu}, ...)
//    runs as std::regex over a "collapsed" text: every code point >= 128 becomes one byte for its
//    category (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark, 0xD5 symbol, 0xD0 other,
//    0x0B whitespace) and each \p{..} becomes a class of that byte and its ASCII members.
//  - Any other pattern runs as std::wregex over the code points, non-ASCII whitespace read as
//    0x0B (std::wregex's \s knows ASCII only).
// Matches and the text between them become pieces, as llama.cpp keeps them.
#include <cstddef>
#include <string_view>
#include <vector>

namespace vkformer::text::bpe {

// Appends the lengths of the pieces `regex` cuts `piece` into (summing to piece.size()).
// Throws vkformer::Error (internal) if the pattern does not compile.
void split_by_regex(std::u32string_view piece, std::string_view regex, std::vector<size_t>& out);

}  // namespace vkformer::text::bpe
