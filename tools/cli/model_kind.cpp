#include "model_kind.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace vkformer::cli {

namespace {

namespace fs = std::filesystem;

// config.json's keys tell the families apart: PyTorch-shaped models have "arch" (our config,
// docs/models.md, "Model directories"), Hugging Face models "model_type".
// A config.json that is not a small regular file (a FIFO, a device, a directory, gigabytes) is
// not read here: the loader refuses it with its own message.
ModelKind directory_kind(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "modules.json", ec)) return ModelKind::bert;
  const fs::path config_path = dir / "config.json";
  constexpr uintmax_t kMaxConfigBytes = 1 << 20;
  if (!fs::is_regular_file(config_path, ec) || fs::file_size(config_path, ec) > kMaxConfigBytes || ec)
    return ModelKind::other_directory;
  std::ifstream in(config_path, std::ios::binary);
  if (!in) return ModelKind::other_directory;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (!config.is_object()) return ModelKind::other_directory;
  if (config.contains("arch")) return ModelKind::torch;
  if (config.contains("model_type")) return ModelKind::bert;
  return ModelKind::other_directory;
}

std::string what_it_is(ModelKind kind) {
  switch (kind) {
    case ModelKind::gguf: return "a GGUF language model";
    case ModelKind::bert: return "a BERT sentence-embedding model directory";
    case ModelKind::torch: return "a PyTorch-shaped model directory (config.json with \"arch\")";
    case ModelKind::other_file: return "a file that is not a model (GGUF files start with the bytes 'GGUF')";
    case ModelKind::other_directory: return "a directory, not a GGUF file";
    case ModelKind::missing: break;
  }
  return "nothing";
}

// The command that fits each kind, as a hint.
std::string fitting_command(ModelKind kind, const std::string& path) {
  switch (kind) {
    case ModelKind::gguf: return "'vkformer chat --model " + path + "' or 'vkformer generate --model " + path + " --prompt TEXT'";
    case ModelKind::bert: return "'vkformer embed --model " + path + " TEXT...'";
    case ModelKind::torch: return "'vkformer run --model " + path + " --input X.npy --output Y.npy' (seq2seq: 'vkformer generate --model " + path + " --src IDS')";
    default: return "";
  }
}

}  // namespace

ModelKind model_kind(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) return ModelKind::missing;
  if (fs::is_directory(status)) return directory_kind(path);
  if (!fs::is_regular_file(status)) return ModelKind::other_file;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF" ? ModelKind::gguf : ModelKind::other_file;
}

void require_model_kind(const std::string& command, const std::string& path, ModelKind kind) {
  if (kind == ModelKind::missing) throw Error(ErrorCode::io, "--model: '" + path + "' does not exist");
  bool ok = false;
  std::string takes;
  // A directory that holds no model we recognize goes to the command's loader, whose message
  // names the file that is missing or wrong.
  if (command == "generate") {
    ok = kind == ModelKind::gguf || kind == ModelKind::torch || kind == ModelKind::other_directory;
    takes = "a GGUF language model (with --prompt) or a seq2seq model directory (with --src)";
  } else if (command == "chat" || command == "bench" || command == "tune" || command == "perplexity") {
    ok = kind == ModelKind::gguf;
    takes = "a GGUF language model";
  } else if (command == "embed") {
    ok = kind == ModelKind::bert || kind == ModelKind::other_directory;
    takes = "a BERT-family model directory (sentence-transformers' or Hugging Face's)";
  } else if (command == "tokenize") {
    ok = kind != ModelKind::torch;
    takes = "a GGUF file, a BERT model directory, tokenizer.json or vocab.txt";
  } else if (command == "run") {
    ok = kind == ModelKind::torch || kind == ModelKind::other_directory;
    takes = "a model directory with config.json and model.safetensors";
  }
  if (ok) return;
  std::string message = "--model " + path + " is " + what_it_is(kind) + "; '" + command + "' takes " + takes;
  if (const std::string fit = fitting_command(kind, path); !fit.empty()) message += ": try " + fit;
  usage_error(message);
}

}  // namespace vkformer::cli
