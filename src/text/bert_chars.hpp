#pragma once
// The character classes of BERT's normalizer and pre-tokenizer, defined as Hugging Face's
// tokenizers defines them, on utf8proc's Unicode categories.
namespace vkformer::text {

// \t \n \r and the Unicode White_Space property (Z* categories, U+000B, U+000C, U+0085).
bool is_bert_whitespace(char32_t c);
// What clean_text removes: categories Cc, Cf, Co (Cs cannot occur), except \t \n \r which count
// as whitespace. Unassigned code points (Cn) are kept, as Hugging Face keeps them.
bool is_bert_control(char32_t c);
// ASCII punctuation and symbols (33-47, 58-64, 91-96, 123-126) or a P* category.
bool is_bert_punctuation(char32_t c);
// BERT's "Chinese character": the CJK Unified Ideographs blocks and their extensions and the
// compatibility ideographs (not kana or hangul, which are written with spaces).
bool is_cjk_ideograph(char32_t c);
// Category Mn, what strip_accents removes after NFD.
bool is_nonspacing_mark(char32_t c);

}  // namespace vkformer::text
