// The public GgufTokenizer: special tokens split off the raw text, then for the text between
// them pre-tokenizer, byte map and merges (BPE) or SentencePiece's merges by score
// (llama.cpp's llama_vocab::impl::tokenize for BPE and SPM).
#include "vkformer/gguf_tokenizer.hpp"

#include "bpe_unicode.hpp"
#include "bpe_vocab.hpp"
#include "spm_merge.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer {

struct GgufTokenizer::Impl {
  text::bpe::BpeVocab vocab;
};

namespace {

// A stretch of the input: raw text (token < 0) or one special token.
struct Fragment {
  size_t begin, size;
  int32_t token;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// llama.cpp's tokenizer_st_partition: for each special token, longest first, every occurrence
// in the text fragments left so far, scanning left to right, becomes a token fragment. (So a
// longer token wins over a shorter one anywhere in the text, not only where both start.)
std::vector<Fragment> split_special(std::string_view text, const text::bpe::BpeVocab& v,
                                    bool parse_special) {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({0, text.size(), -1});
  std::vector<Fragment> next;
  for (int32_t id : v.special_tokens) {
    if (!parse_special && (v.attrs[id] & (text::bpe::kAttrControl | text::bpe::kAttrUnknown)))
      continue;  // user-defined tokens are split off either way
    const std::string& token = v.tokens[id];
    if (text.find(token) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view raw = text.substr(f.begin, f.size);
      size_t pos = 0;
      for (size_t hit; (hit = raw.find(token, pos)) != std::string_view::npos;) {
        // Tokens marked lstrip / rstrip take the spaces beside them (llama.cpp tests isspace).
        size_t left_end = hit;
        if (v.attrs[id] & text::bpe::kAttrLstrip)
          while (left_end > pos && is_space(raw[left_end - 1])) --left_end;
        if (left_end > pos) next.push_back({f.begin + pos, left_end - pos, -1});
        next.push_back({0, 0, id});
        pos = hit + token.size();
        if (v.attrs[id] & text::bpe::kAttrRstrip)
          while (pos < raw.size() && is_space(raw[pos])) ++pos;
      }
      if (pos < raw.size()) next.push_back({f.begin + pos, raw.size() - pos, -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

// SentencePiece writes a space as U+2581.
std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ')
      out += "\xE2\x96\x81";
    else
      out += c;
  }
  return out;
}

// SentencePiece-style BPE (gemma4): the pieces' UTF-8 merged as it is; a piece of newlines that
// is a token is taken whole; bytes without a token go through <0xNN>.
void encode_raw_spm_style(std::string_view raw, const text::bpe::BpeVocab& v,
                          std::vector<int32_t>& out) {
  const std::string escaped = escape_spaces(raw);
  std::u32string cps = text::bpe::decode_lenient(escaped);
  size_t start = 0;
  for (size_t len : text::bpe::pre_tokenize(cps, v.pre->steps)) {
    std::string word;
    for (size_t i = start; i < start + len; ++i) text::bpe::append_utf8_lenient(word, cps[i]);
    start += len;
    if (word.find_first_not_of('\n') == std::string::npos) {
      if (auto it = v.index.find(word); it != v.index.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    text::bpe::merge_word(word, v.index, v.merges, v.pre->ignore_merges, out, v.byte_token);
  }
}

void encode_raw(std::string_view raw, const text::bpe::BpeVocab& v, std::vector<int32_t>& out) {
  if (v.pre->spm_style) return encode_raw_spm_style(raw, v, out);
  std::u32string cps = text::bpe::decode_lenient(raw);
  std::string word;
  size_t start = 0;
  for (size_t len : text::bpe::pre_tokenize(cps, v.pre->steps)) {
    // The word's code points as UTF-8 again (so an invalid byte is U+FFFD's three bytes), each
    // byte then as GPT-2's character for it.
    std::string utf8;
    for (size_t i = start; i < start + len; ++i) text::bpe::append_utf8_lenient(utf8, cps[i]);
    start += len;
    word.clear();
    for (unsigned char b : utf8) word += text::bpe::byte_to_unicode(b);
    text::bpe::merge_word(word, v.index, v.merges, v.pre->ignore_merges, out);
  }
}

}  // namespace

GgufTokenizer GgufTokenizer::from_gguf(const GgufFile& file) {
  auto impl = std::make_shared<Impl>();
  impl->vocab = text::bpe::read_bpe_vocab(file);
  return GgufTokenizer(std::move(impl));
}

GgufTokenizer GgufTokenizer::load(const std::filesystem::path& gguf) {
  return from_gguf(GgufFile(gguf));
}

const GgufTokenizer::Impl& GgufTokenizer::impl() const {
  if (!impl_)
    throw Error(ErrorCode::invalid_argument, "GgufTokenizer: used after being moved from");
  return *impl_;
}

std::vector<int32_t> GgufTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const text::bpe::BpeVocab& v = impl().vocab;
  std::vector<int32_t> ids;
  if (add_special && v.add_bos) ids.push_back(v.bos);
  // SentencePiece: a space before text at the start or after a special token.
  bool after_special = true;
  for (const Fragment& f : split_special(text, v, parse_special)) {
    if (f.token >= 0) {
      ids.push_back(f.token);
      after_special = true;
    } else if (v.kind == text::bpe::VocabKind::spm) {
      std::string raw = v.add_space_prefix && after_special ? " " : "";
      raw += text.substr(f.begin, f.size);
      text::bpe::spm_tokenize(escape_spaces(raw), v, ids);
      after_special = false;
    } else {
      encode_raw(text.substr(f.begin, f.size), v, ids);
    }
  }
  if (add_special && v.add_eos) ids.push_back(v.eos);
  return ids;
}

std::string GgufTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  // The space SentencePiece put before the text: llama.cpp's detokenizer drops one leading
  // space of the first token's piece.
  if (impl().vocab.add_space_prefix && !ids.empty() && token_bytes(ids[0]).starts_with(' '))
    out.erase(0, 1);
  return out;
}

namespace {
void check_id(const text::bpe::BpeVocab& v, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= v.tokens.size())
    throw Error(ErrorCode::invalid_argument,
                "GgufTokenizer: token id " + std::to_string(id) + " is outside the vocabulary (" +
                    std::to_string(v.tokens.size()) + " tokens, ids 0.." +
                    std::to_string(v.tokens.size() - 1) + ")");
}
}  // namespace

const std::string& GgufTokenizer::token_bytes(int32_t id) const {
  check_id(impl().vocab, id);
  return impl().vocab.bytes[static_cast<size_t>(id)];
}

const std::string& GgufTokenizer::id_to_token(int32_t id) const {
  check_id(impl().vocab, id);
  return impl().vocab.tokens[static_cast<size_t>(id)];
}

std::optional<int32_t> GgufTokenizer::token_to_id(std::string_view token) const {
  const auto& index = impl().vocab.index;
  auto it = index.find(std::string(token));
  if (it == index.end()) return std::nullopt;
  return it->second;
}

size_t GgufTokenizer::vocab_size() const { return impl().vocab.tokens.size(); }
int32_t GgufTokenizer::bos_id() const { return impl().vocab.bos; }
int32_t GgufTokenizer::eos_id() const { return impl().vocab.eos; }
int32_t GgufTokenizer::eot_id() const { return impl().vocab.eot; }
bool GgufTokenizer::add_bos() const { return impl().vocab.add_bos; }
bool GgufTokenizer::add_eos() const { return impl().vocab.add_eos; }
const std::string& GgufTokenizer::pre_tokenizer() const { return impl().vocab.pre_name; }

bool GgufTokenizer::is_end_of_generation(int32_t id) const {
  const auto& v = impl().vocab;
  return id >= 0 && static_cast<size_t>(id) < v.tokens.size() && v.end_of_generation[id];
}

bool GgufTokenizer::is_control(int32_t id) const {
  const auto& v = impl().vocab;
  check_id(v, id);
  return v.attrs[id] & (text::bpe::kAttrControl | text::bpe::kAttrUnknown);
}

std::string GgufTokenizer::supported_pre_tokenizers() {
  return text::bpe::supported_pre_tokenizers();
}

}  // namespace vkformer
