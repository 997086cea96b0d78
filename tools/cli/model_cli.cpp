#include "model_cli.hpp"

#include <cstdio>
#include <filesystem>

#include "cli_options.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

namespace vkformer::cli {

ModelConfig ModelArgs::config() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorCode::io, "--model: model directory '" + dir + "' " +
                                   (ec && ec != std::errc::no_such_file_or_directory
                                        ? "cannot be reached: " + ec.message()
                                        : std::string(fs::exists(dir, ec) ? "is not a directory"
                                                                          : "does not exist")));
  try {
    return ModelConfig::load((fs::path(dir) / "config.json").string());
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--model: ") + e.what());
  }
}

ModelOptions ModelArgs::options() const {
  ModelOptions o;
  o.dtype = dtype == "f16" ? DType::f16 : DType::f32;
  return o;
}

void add_model_options(CLI::App& sub, ModelArgs& args) {
  add_model_dir_option(sub, args.dir,
                       "Model directory: config.json and model.safetensors (see docs/models.md, 'Model "
                       "directories')");
  sub.add_option("--dtype", args.dtype,
                 "Storage type of weights and activations on the device: f32 or f16 (math is "
                 "fp32 either way; default: f32)")
      ->check(CLI::IsMember({"f32", "f16"}).description(""))
      ->type_name("f32|f16");
}

std::string describe(const ModelConfig& c) {
  using Arch = ModelConfig::Arch;
  std::string s = ModelConfig::arch_name(c.arch);
  auto layers = [](int64_t n) { return std::to_string(n) + (n == 1 ? " layer" : " layers"); };
  switch (c.arch) {
    case Arch::encoder: s += ", " + layers(c.num_encoder_layers); break;
    case Arch::decoder: s += ", " + layers(c.num_decoder_layers); break;
    case Arch::transformer:
    case Arch::seq2seq:
      s += ", " + std::to_string(c.num_encoder_layers) + " + " + layers(c.num_decoder_layers);
      break;
  }
  s += ", d_model " + std::to_string(c.d_model) + ", " + std::to_string(c.nhead) +
       (c.nhead == 1 ? " head" : " heads") + ", feed-forward " + std::to_string(c.dim_feedforward) +
       ", " + (c.activation == Activation::gelu ? "gelu" : "relu") + ", " +
       (c.norm_first ? "pre-norm" : "post-norm");
  if (c.arch == Arch::seq2seq)
    s += ", vocabularies " + std::to_string(c.src_vocab) + " -> " + std::to_string(c.tgt_vocab);
  return s;
}

std::string describe(const HostTensor& t) {
  const char* kind = t.dtype() == DType::f32 ? "float32" : t.dtype() == DType::f16 ? "float16" : "integer";
  return std::string(kind) + " " + t.shape().str();
}

HostTensor read_npy_for(const std::string& option, const std::string& path) {
  try {
    return read_npy(path);
  } catch (const Error& e) {
    throw Error(e.code(), option + " " + e.what());  // the message starts with the path
  }
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string format_ms(double ms) {
  char buf[32];
  if (ms >= 1000)
    std::snprintf(buf, sizeof buf, "%.2f s", ms / 1000);
  else if (ms >= 10)
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  else
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  return buf;
}

}  // namespace vkformer::cli
