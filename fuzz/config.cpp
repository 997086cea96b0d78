// libFuzzer harness: config.json text -> ModelConfig::parse. A vkformer::Error is the expected
// answer to a broken config; a crash, a sanitizer report, a leak or any other exception is a bug.
// A config that parses must also survive to_json() and parse() again unchanged, since that is
// how vkformer writes configs back (C API, `vkformer` tool).
#include <cstddef>
#include <cstdint>
#include <string>

#include "vkformer/error.hpp"
#include "vkformer/model.hpp"

namespace {

bool same(const vkformer::ModelConfig& a, const vkformer::ModelConfig& b) {
  return a.arch == b.arch && a.d_model == b.d_model && a.nhead == b.nhead &&
         a.dim_feedforward == b.dim_feedforward && a.num_encoder_layers == b.num_encoder_layers &&
         a.num_decoder_layers == b.num_decoder_layers && a.activation == b.activation &&
         a.layer_norm_eps == b.layer_norm_eps && a.norm_first == b.norm_first &&
         a.final_norm == b.final_norm && a.src_vocab == b.src_vocab &&
         a.tgt_vocab == b.tgt_vocab && a.max_len == b.max_len;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using vkformer::ModelConfig;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ModelConfig config;
  try {
    config = ModelConfig::parse(text, "fuzz");
  } catch (const vkformer::Error&) {
    return 0;
  }
  // Not caught: a config that parsed but whose own JSON does not is a bug.
  if (!same(config, ModelConfig::parse(config.to_json(), "fuzz: to_json()"))) __builtin_trap();
  return 0;
}
