// `vkformer tokenize`: a model's tokenizer on its own, one JSON object per text ({"ids": [...],
// "tokens": [...]}), to check it against another implementation: a model directory's WordPiece
// tokenizer, or a GGUF file's byte-level BPE tokenizer (as llama.cpp's llama-tokenize runs it).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "llm_cli.hpp"
#include "vkformer/bpe_tokenizer.hpp"
#include "vkformer/error.hpp"
#include "vkformer/tokenizer.hpp"

namespace vkformer::cli {

std::vector<std::string> read_texts(const std::vector<std::string>& args, const std::string& file);

namespace {

struct TokenizeArgs {
  std::string model, file;
  std::vector<std::string> texts;
  size_t max_length = 0;
  bool no_parse_special = false;
};

// BOS/EOS as the file asks (llama-tokenize's default), special tokens parsed unless told not to.
// Token strings are the vocabulary's (GPT-2's byte characters), so they are always UTF-8.
int tokenize_gguf(const TokenizeArgs& args, const std::vector<std::string>& texts) {
  if (args.max_length != 0)
    throw Error(ErrorCode::invalid_argument,
                "tokenize: --max-length applies to WordPiece tokenizers, not to " + args.model);
  const BpeTokenizer tok = BpeTokenizer::load(args.model);
  for (const std::string& text : texts) {
    std::vector<int32_t> ids = tok.encode(text, true, !args.no_parse_special);
    std::vector<std::string> tokens;
    for (int32_t id : ids) tokens.push_back(tok.id_to_token(id));
    std::cout << nlohmann::json{{"ids", ids}, {"tokens", tokens}}.dump(
                     -1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  }
  return 0;
}

int tokenize_command(const TokenizeArgs& args) {
  const std::vector<std::string> texts = read_texts(args.texts, args.file);
  // By the file's first bytes, as generate decides (llm_cli.hpp): a GGUF named model.bin was
  // read as a vocab.txt.
  if (is_gguf_path(args.model)) return tokenize_gguf(args, texts);
  if (args.no_parse_special)
    throw Error(ErrorCode::invalid_argument,
                "tokenize: --no-parse-special applies to GGUF (BPE) tokenizers, not to " + args.model);
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
  auto* sub = app.add_subcommand(
      "tokenize",
      "Tokenize texts with a model directory's WordPiece tokenizer (tokenizer.json, or vocab.txt "
      "+ tokenizer_config.json; [CLS] and [SEP] included) or a GGUF file's byte-level BPE "
      "tokenizer (as llama.cpp: BOS/EOS where the file asks, special tokens like <|im_start|> "
      "parsed). Prints one JSON object per text: {\"ids\": [...], \"tokens\": [...]}. Needs "
      "no Vulkan device.");
  auto args = std::make_shared<TokenizeArgs>();
  sub->add_option("--model", args->model, "Model directory, tokenizer.json, vocab.txt or FILE.gguf")
      ->required()
      ->type_name("DIR");
  sub->add_option("texts", args->texts, "Texts to tokenize")->type_name("TEXT");
  sub->add_option("--file", args->file, "Also tokenize each line of this UTF-8 file")->type_name("F");
  sub->add_option("--max-length", args->max_length,
                  "Keep at most N tokens, [CLS] and [SEP] included (default: 0 = all)")
      ->check(whole_number_in(0, INT32_MAX))
      ->type_name("N");
  sub->add_flag("--no-parse-special", args->no_parse_special,
                "GGUF: read special-token text like <|im_start|> as plain text");
  return {sub, [args]() { return tokenize_command(*args); }};
}

}  // namespace vkformer::cli
