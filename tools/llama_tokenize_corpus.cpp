// Tokenizes many texts with llama.cpp's tokenizer in one process, for tests/fixtures/make_bpe_golden.py:
// the same call llama-tokenize makes (llama_tokenize with add_special = the vocabulary's
// add_bos, as common_tokenize passes it), without loading the vocabulary once per text. Built by
// make_bpe_golden.py against the peer build of tools/build_llama_cpp_peer.sh; not part of
// vkformer.
//
//   llama_tokenize_corpus MODEL.gguf TEXTS.hex
//
// TEXTS.hex: one text a line, as hex bytes. Output: "add_special 0|1", then per text one line
// "<ids with special tokens parsed>|<ids without>", ids separated by spaces.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text,
                                  bool add_special, bool parse_special) {
  std::vector<llama_token> ids(text.size() + 2);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), add_special, parse_special);
  if (n < 0) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), add_special, parse_special);
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TEXTS.hex\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const bool add_special = llama_vocab_get_add_bos(vocab);
  std::cout << "add_special " << add_special << "\n";
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    const std::string text = from_hex(line);
    for (bool parse_special : {true, false}) {
      const char* sep = "";
      for (llama_token id : tokenize(vocab, text, add_special, parse_special)) {
        std::cout << sep << id;
        sep = " ";
      }
      std::cout << (parse_special ? "|" : "\n");
    }
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
