// Reads tokenizer.ggml.* the way llama.cpp's llama_vocab::load does for a "gpt2", "gemma4" or
// "llama" (SentencePiece) model, with its special-token rules (defaults, tokens recognized by
// their text, end-of-generation set, per-model strip rules), and refuses what llama.cpp would
// warn about or crash on.
#include "bpe_vocab.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <string_view>

#include "bpe_unicode.hpp"
#include "../io/io_util.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::text::bpe {

namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

std::string quote(std::string_view s) { return io::quote_name(s, 64); }

Error format_error(const BpeVocab& v, std::string_view key, const std::string& what) {
  return Error(ErrorCode::format, v.source + ": " + std::string(key) + ": " + what);
}

// Token types as GGUF stores them (llama.cpp's LLAMA_TOKEN_TYPE_*), 0 undefined.
uint8_t attr_of_type(int64_t type) {
  static constexpr std::array<uint8_t, 7> kAttr = {
      0, kAttrNormal, kAttrUnknown, kAttrControl, kAttrUserDefined, kAttrUnused, kAttrByte};
  return kAttr[static_cast<size_t>(type)];
}

void read_tokens(const GgufFile& file, BpeVocab& v) {
  const auto& strings = file.get_strings(kTokensKey);
  if (strings.empty()) throw format_error(v, kTokensKey, "the vocabulary is empty");
  if (strings.size() > static_cast<size_t>(INT32_MAX))
    throw format_error(v, kTokensKey, "more than 2^31 - 1 tokens");
  const size_t n = strings.size();
  v.tokens.reserve(n);
  v.index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp names an empty token so that it stays unique and printable.
    std::string text = strings[i].empty() ? "[EMPTY_" + std::to_string(i) + "]"
                                          : std::string(strings[i]);
    auto [it, fresh] = v.index.emplace(text, static_cast<int32_t>(i));
    if (!fresh)
      throw format_error(v, kTokensKey, "token " + std::to_string(i) + " " + quote(text) +
                                            " is also token " + std::to_string(it->second));
    v.tokens.push_back(std::move(text));
  }

  v.attrs.assign(n, kAttrNormal);
  if (const GgufValue* types = file.find(kTypesKey)) {
    std::vector<int64_t> t = types->as_ints(kTypesKey);
    if (t.size() != n)
      throw format_error(v, kTypesKey, std::to_string(t.size()) + " types for " +
                                           std::to_string(n) + " tokens in " +
                                           std::string(kTokensKey));
    for (size_t i = 0; i < n; ++i) {
      if (t[i] < 0 || t[i] > 6)
        throw format_error(v, kTypesKey, "token " + std::to_string(i) + " has type " +
                                             std::to_string(t[i]) + " (expected 0..6)");
      v.attrs[i] = attr_of_type(t[i]);
    }
  }
  if (const GgufValue* scores = file.find(kScoresKey)) {
    uint64_t m = scores->size(kScoresKey);
    if (m != n)
      throw format_error(v, kScoresKey, std::to_string(m) + " scores for " + std::to_string(n) +
                                            " tokens in " + std::string(kTokensKey));
    if (v.kind == VocabKind::spm) {
      std::vector<double> d = scores->as_floats(kScoresKey);
      v.scores.assign(d.begin(), d.end());
    }
  }
  if (v.kind == VocabKind::spm && v.scores.empty()) v.scores.assign(n, 0.0f);
}

void read_merges(const GgufFile& file, BpeVocab& v) {
  const auto& merges = file.get_strings(kMergesKey);
  v.merges.pairs.reserve(merges.size());
  auto id = [&](std::string_view s) -> int32_t {
    auto it = v.index.find(std::string(s));
    return it == v.index.end() ? -1 : it->second;
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string_view m = merges[i];
    // As llama.cpp: the first space after the first byte separates the two parts.
    size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    auto where = [&] { return "merge " + std::to_string(i) + " " + quote(m); };
    if (space == std::string_view::npos)
      throw format_error(v, kMergesKey, where() + " is not two tokens separated by a space");
    std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    int32_t a = id(left), b = id(right), ab = id(std::string(left) + std::string(right));
    if (a < 0 || b < 0 || ab < 0) {
      std::string missing = a < 0 ? quote(left) : b < 0 ? quote(right)
                                                       : quote(std::string(left) + std::string(right));
      throw format_error(v, kMergesKey, where() + " names " + missing + ", which is not in " +
                                            std::string(kTokensKey));
    }
    // A repeated pair keeps its first (lowest) rank, as llama.cpp's map does.
    v.merges.pairs.emplace(MergeTable::key(a, b),
                           MergeTable::Merge{static_cast<int32_t>(i), ab});
  }
}

// tokenizer.ggml.<name>_token_id when present; ids outside the vocabulary are errors.
std::optional<int32_t> read_id(const GgufFile& file, const BpeVocab& v, std::string_view name) {
  std::string key = "tokenizer.ggml." + std::string(name) + "_token_id";
  if (!file.has(key)) return std::nullopt;
  uint64_t id = file.get_uint(key);
  if (id >= v.tokens.size())
    throw format_error(v, key, "id " + std::to_string(id) + " is outside the vocabulary (" +
                                   std::to_string(v.tokens.size()) + " tokens)");
  return static_cast<int32_t>(id);
}

// Tokens llama.cpp recognizes by their text when the file does not name them.
using Names = std::initializer_list<std::string_view>;
const Names kEotNames = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                         "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                         "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                         "<end_of_utterance>"};
const Names kEomNames = {"<|eom_id|>"};
const Names kFimPreNames = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                            "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
const Names kFimSufNames = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                            "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
const Names kFimMidNames = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                            "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
const Names kFimPadNames = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const Names kFimRepNames = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                            "<reponame>"};
const Names kFimSepNames = {"<|file_sep|>"};
const Names kEogNames = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                         "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                         "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                         "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                         "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                         "[e~["};

// The file's id for a role, else the first of `names` in the vocabulary (which llama.cpp then
// treats as a control token), else -1.
int32_t special_id(const GgufFile& file, BpeVocab& v, std::string_view key, Names names) {
  if (auto id = read_id(file, v, key)) return *id;
  for (std::string_view name : names) {
    auto it = v.index.find(std::string(name));
    if (it == v.index.end()) continue;
    v.attrs[it->second] |= kAttrControl;
    return it->second;
  }
  return -1;
}

// A byte token is written <0xNN>.
uint8_t byte_of_token(const BpeVocab& v, size_t id) {
  const std::string& t = v.tokens[id];
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || hex(t[3]) < 0 ||
      hex(t[4]) < 0)
    throw format_error(v, kTypesKey, "token " + std::to_string(id) + " " + quote(t) +
                                         " is a byte token (type 6) but not written <0xNN>");
  return static_cast<uint8_t>(hex(t[3]) * 16 + hex(t[4]));
}

// What a normal token's characters stand for through GPT-2's byte map; a character outside
// the map is spelled out as llama.cpp does ("[UNK_BYTE_0x..." + the token + "]").
std::string unmap_bytes(const std::string& token) {
  std::string out;
  for (char32_t cp : decode_lenient(token)) {
    if (auto b = unicode_to_byte(cp)) {
      out.push_back(static_cast<char>(*b));
      continue;
    }
    std::string utf8;
    append_utf8_lenient(utf8, cp);
    out += "[UNK_BYTE_0x";
    for (unsigned char c : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", c);
      out += hex;
    }
    out += token + "]";
  }
  return out;
}

// A token's text with SentencePiece's U+2581 read as the space it stands for.
std::string unescape_spaces(const std::string& token) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::string out;
  for (size_t i = 0; i < token.size();) {
    if (token.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += token[i++];
    }
  }
  return out;
}

Error unsupported_model(const BpeVocab& v) {
  std::string_view what = v.model == "bert"   ? " (WordPiece)"
                          : v.model == "t5"   ? " (SentencePiece Unigram)"
                          : v.model == "rwkv" ? " (RWKV)"
                          : (v.model == "none" || v.model == "no_vocab") ? " (no vocabulary)"
                                                                         : "";
  return Error(ErrorCode::unsupported,
               v.source + ": " + std::string(kModelKey) + ": unsupported vocabulary kind " +
                   quote(v.model) + std::string(what) +
                   "; supported: 'gpt2' (byte-level BPE), 'llama' (SentencePiece BPE), 'gemma4' "
                   "(SentencePiece-style BPE)");
}

// llama.cpp's per-model attributes keyed on general.name and tokenizer.ggml.pre: Phi-3 drops
// the spaces after its special tokens (but not after <unk>, <s>, <|endoftext|>), a few encoders
// those before their mask token.
void apply_strip_rules(const GgufFile& file, BpeVocab& v) {
  std::string name(file.get_string_or("general.name", ""));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto set = [&](std::string_view token, uint8_t attr, bool on) {
    auto it = v.index.find(std::string(token));
    if (it == v.index.end()) return;
    v.attrs[it->second] = on ? (v.attrs[it->second] | attr) : (v.attrs[it->second] & ~attr);
  };
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_tokens) v.attrs[id] |= kAttrRstrip;
    set("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, kAttrRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace

BpeVocab read_bpe_vocab(const GgufFile& file) {
  BpeVocab v;
  v.source = file.label();
  v.model = std::string(file.get_string(kModelKey));
  v.pre_name = std::string(file.get_string_or(kPreKey, "default"));
  if (v.model == "gpt2") {
    v.pre = find_pre_tokenizer(v.pre_name);
  } else if (v.model == "gemma4") {
    v.pre_name = "gemma4";  // llama.cpp sets it whatever the file says
    v.pre = find_pre_tokenizer(v.pre_name);
  } else if (v.model == "llama") {
    v.kind = VocabKind::spm;
  } else {
    throw unsupported_model(v);
  }
  if (v.kind == VocabKind::bpe && !v.pre)
    throw Error(ErrorCode::unsupported, v.source + ": " + std::string(kPreKey) +
                                            ": pre-tokenizer " + quote(v.pre_name) +
                                            " is not supported; supported: " +
                                            supported_pre_tokenizers());
  v.escape_whitespaces = v.kind == VocabKind::spm || v.pre->spm_style;

  read_tokens(file, v);
  if (v.kind == VocabKind::bpe) read_merges(file, v);

  // llama.cpp's defaults: for "gpt2" BOS and EOS 11 (GPT-2's convention), for SentencePiece
  // BOS 1, EOS 2 and UNK 0, for "gemma4" none; each only when the vocabulary has that many tokens.
  const int32_t n = static_cast<int32_t>(v.tokens.size());
  auto fallback = [&](int32_t gpt2, int32_t spm) {
    int32_t id = v.model == "gpt2" ? gpt2 : v.kind == VocabKind::spm ? spm : -1;
    return id < n ? id : -1;
  };
  v.bos = read_id(file, v, "bos").value_or(fallback(11, 1));
  v.eos = read_id(file, v, "eos").value_or(fallback(11, 2));
  v.unk = read_id(file, v, "unknown").value_or(fallback(-1, 0));
  v.pad = read_id(file, v, "padding").value_or(-1);
  read_id(file, v, "seperator");  // llama.cpp's spelling; only checked
  read_id(file, v, "mask");
  v.eot = special_id(file, v, "eot", kEotNames);
  v.eom = special_id(file, v, "eom", kEomNames);
  special_id(file, v, "fim_pre", kFimPreNames);
  special_id(file, v, "fim_suf", kFimSufNames);
  special_id(file, v, "fim_mid", kFimMidNames);
  int32_t fim_pad = special_id(file, v, "fim_pad", kFimPadNames);
  int32_t fim_rep = special_id(file, v, "fim_rep", kFimRepNames);
  int32_t fim_sep = special_id(file, v, "fim_sep", kFimSepNames);

  const bool spm = v.kind == VocabKind::spm;
  v.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", spm || v.pre->add_bos_default);
  v.add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", false);
  if (v.model == "gemma4") v.add_bos = true;  // llama.cpp overrides a false one (its PR 21500)
  // Only SentencePiece tokenization adds the space prefix (true unless the file says false).
  v.add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", spm) && spm;
  if (v.add_bos && v.bos < 0)
    throw format_error(v, "tokenizer.ggml.add_bos_token", "true, but there is no BOS token");
  if (v.add_eos && v.eos < 0)
    throw format_error(v, "tokenizer.ggml.add_eos_token", "true, but there is no EOS token");

  v.end_of_generation.assign(v.tokens.size(), 0);
  for (int32_t id : {fim_pad, fim_rep, fim_sep, v.eos, v.eot, v.eom})
    if (id >= 0) v.end_of_generation[id] = 1;
  for (std::string_view name : kEogNames) {
    auto it = v.index.find(std::string(name));
    if (it == v.index.end()) continue;
    v.end_of_generation[it->second] = 1;
    v.attrs[it->second] |= kAttrControl;
  }

  for (int32_t id = 0; id < n; ++id)
    if (v.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v.special_tokens.push_back(id);
  std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });
  apply_strip_rules(file, v);

  // The byte fallback of SentencePiece (and gemma4): <0xNN>, else (llama only) the byte itself.
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    auto it = v.index.find(hex);
    if (it == v.index.end() && spm) it = v.index.find(std::string(1, static_cast<char>(b)));
    v.byte_token[b] = it == v.index.end() ? -1 : it->second;
  }

  v.bytes.resize(v.tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    uint8_t a = v.attrs[id];
    if (a & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v.bytes[id] = v.tokens[id];
    else if ((a & kAttrNormal) && v.escape_whitespaces)
      v.bytes[id] = unescape_spaces(v.tokens[id]);
    else if (a & kAttrNormal)
      v.bytes[id] = unmap_bytes(v.tokens[id]);
    else if (a & kAttrByte)
      v.bytes[id] = std::string(1, static_cast<char>(byte_of_token(v, id)));
  }
  return v;
}

}  // namespace vkformer::text::bpe
