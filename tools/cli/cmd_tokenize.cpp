// `vkformer tokenize`: a model's tokenizer on its own, one JSON object per text ({"ids": [...],
// "tokens": [...]}), to check it against another implementation: a model directory's WordPiece
// tokenizer, or a GGUF file's byte-level BPE tokenizer (as llama.cpp's llama-tokenize runs it).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cli_options.hpp"
#include "llm_cli.hpp"
#include "model_kind.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/tokenizer.hpp"

namespace vkformer::cli {

// What `vkformer tokenize --help` says first.
constexpr const char* kTokenizeHelp =
    "Tokenize texts with a model directory's WordPiece tokenizer (tokenizer.json, or vocab.txt "
    "+ tokenizer_config.json; [CLS] and [SEP] included) or a GGUF file's byte-level BPE "
    "tokenizer (as llama.cpp: BOS/EOS where the file asks, special tokens like <|im_start|> "
    "parsed). Prints one JSON object per text: {\"ids\": [...], \"tokens\": [...]}, and for GGUF "
    "\"text\": [...], what each token decodes to (bytes of a split character as <0xF0>). Needs "
    "no Vulkan device.";

namespace {

struct TokenizeArgs {
  std::string model, file;
  std::vector<std::string> texts;
  size_t max_length = 0;
  bool no_parse_special = false;
};

// A token's bytes as text a person can read: whole UTF-8 characters as they are, and bytes of a
// character split over tokens as <0xF0> (the vocabulary's byte-level piece, "ĠðŁ", shows
// neither the space nor the emoji).
std::string readable(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n > 0 && i + n <= bytes.size() && utf8_problem(std::string_view(bytes).substr(i, n), "").empty()) {
      out.append(bytes, i, n);
      i += n;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", c);
      out += buf;
      ++i;
    }
  }
  return out;
}

// BOS/EOS as the file asks (llama-tokenize's default), special tokens parsed unless told not to.
// Token strings are the vocabulary's (GPT-2's byte characters), so they are always UTF-8; "text"
// beside them is what each token decodes to.
int tokenize_gguf(const TokenizeArgs& args, const std::vector<std::string>& texts) {
  if (args.max_length != 0)
    usage_error("tokenize: --max-length applies to WordPiece tokenizers, not to " + args.model);
  const GgufTokenizer tok = GgufTokenizer::load(args.model);
  for (const std::string& text : texts) {
    std::vector<int32_t> ids = tok.encode(text, true, !args.no_parse_special);
    std::vector<std::string> tokens, pieces;
    for (int32_t id : ids) {
      tokens.push_back(tok.id_to_token(id));
      pieces.push_back(readable(tok.token_bytes(id)));
    }
    // ordered_json: the keys in this order, "text" beside "tokens", not sorted.
    std::cout << nlohmann::ordered_json{{"ids", ids}, {"tokens", tokens}, {"text", pieces}}.dump(
                     -1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  }
  return 0;
}

int tokenize_command(const TokenizeArgs& args) {
  // By the file's first bytes, as generate decides (model_kind.hpp): a GGUF named model.bin was
  // read as a vocab.txt.
  const ModelKind kind = model_kind(args.model);
  require_model_kind("tokenize", args.model, kind);
  const std::vector<std::string> texts = read_texts(args.texts, args.file);
  if (kind == ModelKind::gguf) return tokenize_gguf(args, texts);
  if (args.no_parse_special)
    usage_error("tokenize: --no-parse-special applies to GGUF (BPE) tokenizers, not to " + args.model);
  const WordPieceTokenizer tok = WordPieceTokenizer::load(args.model);
  for (size_t i = 0; i < texts.size(); ++i) {
    Encoding e;
    try {
      e = tok.encode(texts[i], args.max_length);
    } catch (const Error& err) {
      throw Error(err.code(), "text " + std::to_string(i) + ": " + err.what());
    }
    // Invalid UTF-8 never reaches here (encode refuses it), so dump() cannot throw on tokens.
    std::cout << nlohmann::json{{"ids", e.ids}, {"tokens", e.tokens}}.dump() << "\n";
  }
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app, const GlobalOptions&) {
  auto* sub = app.add_subcommand("tokenize", kTokenizeHelp);
  auto args = std::make_shared<TokenizeArgs>();
  add_model_dir_option(*sub, args->model, "Model directory, tokenizer.json, vocab.txt or FILE.gguf");
  add_text_inputs(*sub, args->texts, args->file, "tokenize");
  add_whole_number(*sub, "--max-length", args->max_length, 0, INT32_MAX,
                   "Keep at most N tokens, [CLS] and [SEP] included (default: 0 = all)");
  sub->add_flag("--no-parse-special", args->no_parse_special,
                "GGUF: read special-token text like <|im_start|> as plain text");
  return {sub, [args]() { return tokenize_command(*args); }};
}

}  // namespace vkformer::cli
