#pragma once
// The Unicode pieces of llama.cpp's byte-level BPE, with its exact conventions: lenient UTF-8
// decoding, code point classes as its pre-tokenizer regexes see them, and GPT-2's byte-to-
// character map. Categories come from utf8proc.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vkformer::text::bpe {

// Decodes UTF-8 as llama.cpp does before pre-tokenizing: a byte that does not start a sequence
// of the length its high bits announce (with continuation bytes) becomes U+FFFD and decoding goes
// on at the next byte. Overlong forms and surrogates are kept as their code points (llama.cpp
// does not check them); a sequence that decodes beyond U+10FFFF, which llama.cpp cannot encode
// again and throws on, is treated as an invalid byte here.
std::u32string decode_lenient(std::string_view bytes);

// Encodes any code point up to U+10FFFF, surrogates included, as llama.cpp does.
void append_utf8_lenient(std::string& out, char32_t cp);

// A code point's class for the pre-tokenizers (llama.cpp's unicode_cpt_flags): one general
// category (Cn unassigned, Cc/Cf/Co/Cs control, L*, M*, N*, P*, S*, Z*) plus White_Space.
enum CharFlag : uint16_t {
  kUndefined = 0x001,
  kNumber = 0x002,
  kLetter = 0x004,
  kSeparator = 0x008,
  kMark = 0x010,
  kPunctuation = 0x020,
  kSymbol = 0x040,
  kControl = 0x080,
  kWhitespace = 0x100,
};
uint16_t char_flags(char32_t cp);
inline bool is_letter(char32_t cp) { return char_flags(cp) & kLetter; }
inline bool is_number(char32_t cp) { return char_flags(cp) & kNumber; }
inline bool is_whitespace(char32_t cp) { return char_flags(cp) & kWhitespace; }

// GPT-2's map from the 256 byte values to printable characters (the printable Latin-1 bytes map
// to themselves, the others to U+0100 + n in byte order), as UTF-8.
const std::string& byte_to_unicode(uint8_t byte);
// The byte a mapped character stands for; nullopt for any other character.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

}  // namespace vkformer::text::bpe
