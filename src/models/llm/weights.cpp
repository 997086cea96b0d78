#include "llm/weights.hpp"

#include "llm/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer::models::llm {

namespace {

std::string block(int64_t i, const char* suffix) { return "blk." + std::to_string(i) + "." + suffix; }

// Weight matrices stay in their stored (quantized) types on the device: the matmul kernels
// dequantize blocks on the fly (on CPU devices through R32_UINT texel views, as fast as f32
// weights while reading a quarter to a sixth of the bytes). false widens them to the activations'
// type at load, which only a comparison of the two needs.
constexpr bool kKeepQuantized = true;

// What the model stores for a tensor of the file: matrices in their stored type (the matmul and
// embedding kernels read every weight type (ggml_weight_type_names()) under either activation
// type) or widened (kKeepQuantized); vectors (the norms) in the activations' type, which rms_norm
// needs.
HostTensor stored(const GgufFile& f, const std::string& name, const Shape& shape, DType activations) {
  if (shape.rank() == 2 && kKeepQuantized) return f.read_raw(name);
  HostTensor h = f.read_f32(name);
  if (h.dtype() != activations) h = h.cast(activations);
  return h.shape() == shape ? h : h.reshaped(shape);
}

// Dims equal but for leading 1s, which ggml (whose unused dims are 1) does not tell apart: a norm
// stored as [1, d] is a [d] norm.
bool same_dims(const Shape& got, const Shape& want) {
  auto strip = [](const Shape& s) {
    std::vector<int64_t> d = s.dims();
    while (d.size() > 1 && d.front() == 1) d.erase(d.begin());
    return d;
  };
  return strip(got) == strip(want);
}

const GgufTensorInfo& checked(const GgufFile& f, const std::string& name, const Shape& want) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t) throw Error(ErrorCode::format, f.label() + ": tensor " + name + " is missing (expected " +
                                             want.str() + ")");
  if (!same_dims(t->shape(), want))
    throw Error(ErrorCode::format, f.label() + ": tensor " + name + " has shape " + t->shape().str() +
                                       ", expected " + want.str());
  const GgmlTypeInfo& type = ggml_type_info(t->type);
  const bool matrix = want.rank() == 2;
  bool readable = type.dequantizable;
  if (matrix) {
    try {
      readable = is_weight_type(dtype_from_ggml(t->type));
    } catch (const Error&) {
      readable = false;
    }
  }
  if (!readable)
    throw Error(ErrorCode::format, f.label() + ": tensor " + name + " has type " + std::string(type.name) +
                                       (matrix ? "; weight matrices must be " + std::string(ggml_weight_type_names())
                                               : std::string(", which vkformer cannot read")));
  return *t;
}

// Tensors stacked by rows (their last dims equal; vectors end to end): one projection, or its
// bias, instead of several.
HostTensor stack_rows(const std::vector<HostTensor>& parts) {
  int64_t rows = 0;
  for (const HostTensor& p : parts) rows += p.shape()[0];
  const Shape shape = parts[0].shape().rank() == 1 ? Shape{rows} : Shape{rows, parts[0].shape()[1]};
  HostTensor out(shape, parts[0].dtype());
  size_t at = 0;
  for (const HostTensor& p : parts) {
    std::memcpy(out.data() + at, p.data(), p.nbytes());
    at += p.nbytes();
  }
  return out;
}

}  // namespace

void scale_key_channels(std::vector<float>& q_norm, std::vector<float>& k_norm, int64_t rope_dims, RopeStyle style) {
  const int64_t d = static_cast<int64_t>(k_norm.size()), half = rope_dims / 2;
  if (static_cast<int64_t>(q_norm.size()) != d || rope_dims < 0 || rope_dims > d)
    throw Error(ErrorCode::invalid_argument, "scale_key_channels: q_norm of " + std::to_string(q_norm.size()) +
                                                 " and k_norm of " + std::to_string(d) +
                                                 " values with rope dims " + std::to_string(rope_dims));
  auto partner = [&](int64_t i) {
    if (i >= 2 * half) return i;
    return style == RopeStyle::neox ? (i < half ? i + half : i - half) : i ^ 1;
  };
  auto gain = [](const std::vector<float>& w, int64_t a, int64_t b) {
    const double x = w[static_cast<size_t>(a)], y = w[static_cast<size_t>(b)];
    return std::sqrt((x * x + y * y) / 2);
  };
  std::vector<double> s(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {
    const int64_t j = partner(i);
    s[static_cast<size_t>(i)] =
        std::sqrt(std::clamp(gain(q_norm, i, j) / std::max(gain(k_norm, i, j), 1e-3), 1.0 / 16, 16.0));
  }
  for (size_t i = 0; i < s.size(); ++i) {
    q_norm[i] = static_cast<float>(q_norm[i] / s[i]);
    k_norm[i] = static_cast<float>(k_norm[i] * s[i]);
  }
}

LanguageModelWeights load_weights(Device& device, const GgufFile& f, const LanguageModelConfig& c, DType act,
                                  bool scale_keys) {
  const int64_t d = c.d_model, v = c.vocab_size;
  // Every check first, so a bad file uploads nothing.
  std::vector<TensorSpec> plan = {{"token_embd.weight", {v, d}}, {"output_norm.weight", {d}}};
  if (!c.tied_output) plan.push_back({"output.weight", {v, d}});
  if (c.rope_freq_factors) plan.push_back({"rope_freqs.weight", {c.rope_dims / 2}});
  for (int64_t i = 0; i < c.n_layers; ++i)
    for (TensorSpec& t : block_tensors(c, i)) plan.push_back(std::move(t));
  std::map<std::string, Shape> shapes;
  for (const TensorSpec& p : plan) {
    checked(f, p.name, p.shape);
    shapes.emplace(p.name, p.shape);
  }
  auto read = [&](const std::string& name) { return stored(f, name, shapes.at(name), act); };
  auto up = [&](const std::string& name) { return device.upload(read(name)); };
  LanguageModelWeights w;
  w.token_embd = up("token_embd.weight");
  w.output_norm = up("output_norm.weight");
  w.output = c.tied_output ? w.token_embd : up("output.weight");
  if (c.rope_freq_factors) {
    w.rope_freqs = f.read_f32("rope_freqs.weight").to_f32();
    for (size_t i = 0; i < w.rope_freqs.size(); ++i)
      if (!(w.rope_freqs[i] > 0.0f) || !std::isfinite(w.rope_freqs[i]))
        throw Error(ErrorCode::format, f.label() + ": tensor rope_freqs.weight[" + std::to_string(i) + "] is " +
                                           std::to_string(w.rope_freqs[i]) + ", expected a finite number > 0");
  }
  const Family& fam = family_of(c);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights l;
    l.attn_norm = up(block(i, "attn_norm.weight"));
    // Projections that read the same input stacked into one weight where their types agree
    // (one matmul instead of several), else uploaded apart; their biases follow.
    auto stacked = [&](std::initializer_list<const char*> names, bool allowed, std::vector<DeviceTensor>* biases) {
      std::vector<HostTensor> parts;
      for (const char* name : names) parts.push_back(read(block(i, name)));
      bool same = allowed;
      for (const HostTensor& t : parts) same = same && t.dtype() == parts[0].dtype();
      std::vector<DeviceTensor> out;
      std::vector<HostTensor> bias_parts;
      if (biases)
        for (const char* name : names) {
          std::string b = block(i, name);
          bias_parts.push_back(read(b.replace(b.size() - 6, 6, "bias")));  // ".weight" -> ".bias"
        }
      if (same) {
        out.push_back(device.upload(stack_rows(parts)));
        if (biases) biases->push_back(device.upload(stack_rows(bias_parts)));
      } else {
        for (const HostTensor& t : parts) out.push_back(device.upload(t));
        if (biases)
          for (const HostTensor& t : bias_parts) biases->push_back(device.upload(t));
      }
      return out;
    };
    if (fam.fused_qkv) {
      l.qkv.push_back(up(block(i, "attn_qkv.weight")));
    } else {
      // With q/k norms too (Graph::rms_norm_qk norms the packed heads).
      l.qkv = stacked({"attn_q.weight", "attn_k.weight", "attn_v.weight"}, true,
                      c.qkv_bias ? &l.qkv_bias : nullptr);
    }
    if (c.qk_norm && scale_keys && fam.key_scaling) {
      std::vector<float> qn = f.read_f32(block(i, "attn_q_norm.weight")).to_f32();
      std::vector<float> kn = f.read_f32(block(i, "attn_k_norm.weight")).to_f32();
      scale_key_channels(qn, kn, c.rope_dims, c.rope_style);
      const Shape hd{c.head_dim};
      l.q_norm = device.upload(HostTensor::from_f32(hd, qn, act));
      l.k_norm = device.upload(HostTensor::from_f32(hd, kn, act));
    } else if (c.qk_norm) {
      l.q_norm = up(block(i, "attn_q_norm.weight"));
      l.k_norm = up(block(i, "attn_k_norm.weight"));
    }
    l.attn_out = up(block(i, "attn_output.weight"));
    if (c.post_norms) l.attn_post_norm = up(block(i, "post_attention_norm.weight"));
    l.ffn_norm = up(block(i, "ffn_norm.weight"));
    if (fam.fused_gate_up)
      l.gate_up.push_back(up(block(i, "ffn_up.weight")));
    else
      l.gate_up = stacked({"ffn_gate.weight", "ffn_up.weight"}, true, nullptr);
    l.down = up(block(i, "ffn_down.weight"));
    if (c.post_norms) l.ffn_post_norm = up(block(i, "post_ffw_norm.weight"));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace vkformer::models::llm
