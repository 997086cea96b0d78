#pragma once
// What --model points at, found from the file's first bytes or the directory's files, so a
// command given the wrong kind of model says which command fits instead of failing inside a
// loader ("--src is required with a seq2seq model directory" for a README, say).
#include <string>

namespace vkformer::cli {

enum class ModelKind {
  missing,        // nothing there
  gguf,           // a file starting with "GGUF": a language model (generate, chat, tokenize, bench)
  bert,           // a directory with modules.json or a BERT config.json (embed, tokenize)
  torch,          // a directory whose config.json has "arch" (run; generate for seq2seq)
  other_file,     // any other file (text, a .safetensors alone, ...)
  other_directory,  // none of those: the command's loader says what is missing
};

ModelKind model_kind(const std::string& path);

// Throws a UsageError naming --model, what it is, and the command that takes it, unless `kind`
// is one `command` ("generate", "chat", "bench", "tune", "embed", "tokenize", "run") accepts.
// A missing path is an io error (exit status 1) naming --model.
void require_model_kind(const std::string& command, const std::string& path, ModelKind kind);

}  // namespace vkformer::cli
