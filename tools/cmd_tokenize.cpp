// `vkformer tokenize`: a model directory's WordPiece tokenizer on its own, one JSON object per
// text ({"ids": [...], "tokens": [...]}), to check it against another implementation.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "vkformer/error.hpp"
#include "vkformer/tokenizer.hpp"

namespace vkformer::cli {

std::vector<std::string> read_texts(const std::vector<std::string>& args, const std::string& file);

namespace {

struct TokenizeArgs {
  std::string model, file;
  std::vector<std::string> texts;
  size_t max_length = 0;
};

int tokenize_command(const TokenizeArgs& args) {
  const std::vector<std::string> texts = read_texts(args.texts, args.file);
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
      "+ tokenizer_config.json). Prints one JSON object per text: {\"ids\": [...], \"tokens\": "
      "[...]}, [CLS] and [SEP] included. Needs no Vulkan device.");
  auto args = std::make_shared<TokenizeArgs>();
  sub->add_option("--model", args->model, "Model directory, tokenizer.json or vocab.txt")
      ->required()
      ->type_name("DIR");
  sub->add_option("texts", args->texts, "Texts to tokenize")->type_name("TEXT");
  sub->add_option("--file", args->file, "Also tokenize each line of this UTF-8 file")->type_name("F");
  sub->add_option("--max-length", args->max_length,
                  "Keep at most N tokens, [CLS] and [SEP] included (default: 0 = all)")
      ->type_name("N");
  return {sub, [args]() { return tokenize_command(*args); }};
}

}  // namespace vkformer::cli
