// The parameters of each architecture, named and shaped exactly as PyTorch's state_dict() has
// them. The loader checks files against this list, and the graph builders read from it.
#include "vkformer/model.hpp"

namespace vkformer {

namespace {

using Params = std::vector<std::pair<std::string, Shape>>;

void attention(Params& p, const std::string& prefix, int64_t e) {
  p.push_back({prefix + ".in_proj_weight", {3 * e, e}});
  p.push_back({prefix + ".in_proj_bias", {3 * e}});
  p.push_back({prefix + ".out_proj.weight", {e, e}});
  p.push_back({prefix + ".out_proj.bias", {e}});
}

void norm(Params& p, const std::string& prefix, int64_t e) {
  p.push_back({prefix + ".weight", {e}});
  p.push_back({prefix + ".bias", {e}});
}

void layer(Params& p, const std::string& prefix, const ModelConfig& c, bool decoder) {
  const int64_t e = c.d_model, f = c.dim_feedforward;
  attention(p, prefix + ".self_attn", e);
  if (decoder) attention(p, prefix + ".multihead_attn", e);
  p.push_back({prefix + ".linear1.weight", {f, e}});
  p.push_back({prefix + ".linear1.bias", {f}});
  p.push_back({prefix + ".linear2.weight", {e, f}});
  p.push_back({prefix + ".linear2.bias", {e}});
  norm(p, prefix + ".norm1", e);
  norm(p, prefix + ".norm2", e);
  if (decoder) norm(p, prefix + ".norm3", e);
}

void stack(Params& p, const std::string& prefix, const ModelConfig& c, bool decoder) {
  int64_t n = decoder ? c.num_decoder_layers : c.num_encoder_layers;
  for (int64_t i = 0; i < n; ++i) layer(p, prefix + "layers." + std::to_string(i), c, decoder);
  if (c.final_norm) norm(p, prefix + "norm", c.d_model);
}

}  // namespace

std::vector<std::pair<std::string, Shape>> parameter_shapes(const ModelConfig& c) {
  c.validate();
  Params p;
  switch (c.arch) {
    case ModelConfig::Arch::encoder: stack(p, "", c, false); break;
    case ModelConfig::Arch::decoder: stack(p, "", c, true); break;
    case ModelConfig::Arch::transformer:
      stack(p, "encoder.", c, false);
      stack(p, "decoder.", c, true);
      break;
    case ModelConfig::Arch::seq2seq:
      p.push_back({"src_embed.weight", {c.src_vocab, c.d_model}});
      p.push_back({"tgt_embed.weight", {c.tgt_vocab, c.d_model}});
      stack(p, "transformer.encoder.", c, false);
      stack(p, "transformer.decoder.", c, true);
      p.push_back({"generator.weight", {c.tgt_vocab, c.d_model}});
      p.push_back({"generator.bias", {c.tgt_vocab}});
      break;
  }
  return p;
}

}  // namespace vkformer
