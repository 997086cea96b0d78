#include "llama/llama_weights.hpp"

#include <cstring>
#include <map>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer::models::llama {

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

// Tensors stacked by rows (their last dims equal): one projection instead of several.
HostTensor stack_rows(const std::vector<HostTensor>& parts) {
  int64_t rows = 0;
  for (const HostTensor& p : parts) rows += p.shape()[0];
  HostTensor out({rows, parts[0].shape()[1]}, parts[0].dtype());
  size_t at = 0;
  for (const HostTensor& p : parts) {
    std::memcpy(out.data() + at, p.data(), p.nbytes());
    at += p.nbytes();
  }
  return out;
}

}  // namespace

LlamaWeights load_weights(Device& device, const GgufFile& f, const LlamaConfig& c, DType act) {
  const int64_t d = c.d_model, hd = c.head_dim, v = c.vocab_size, ff = c.d_ff;
  struct Planned {
    std::string name;
    Shape shape;
  };
  // Every check first, so a bad file uploads nothing.
  std::vector<Planned> plan = {{"token_embd.weight", {v, d}}, {"output_norm.weight", {d}}};
  if (!c.tied_output) plan.push_back({"output.weight", {v, d}});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    plan.push_back({block(i, "attn_norm.weight"), {d}});
    plan.push_back({block(i, "attn_q.weight"), {c.n_heads * hd, d}});
    plan.push_back({block(i, "attn_k.weight"), {c.n_kv_heads * hd, d}});
    plan.push_back({block(i, "attn_v.weight"), {c.n_kv_heads * hd, d}});
    plan.push_back({block(i, "attn_output.weight"), {d, c.n_heads * hd}});
    plan.push_back({block(i, "ffn_norm.weight"), {d}});
    plan.push_back({block(i, "ffn_gate.weight"), {ff, d}});
    plan.push_back({block(i, "ffn_up.weight"), {ff, d}});
    plan.push_back({block(i, "ffn_down.weight"), {d, ff}});
  }
  std::map<std::string, Shape> shapes;
  for (const Planned& p : plan) {
    checked(f, p.name, p.shape);
    shapes.emplace(p.name, p.shape);
  }
  auto read = [&](const std::string& name) { return stored(f, name, shapes.at(name), act); };
  auto up = [&](const std::string& name) { return device.upload(read(name)); };
  LlamaWeights w;
  w.token_embd = up("token_embd.weight");
  w.output_norm = up("output_norm.weight");
  w.output = c.tied_output ? w.token_embd : up("output.weight");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerWeights l;
    l.attn_norm = up(block(i, "attn_norm.weight"));
    // Projections that read the same input stacked into one weight where their types agree
    // (one matmul instead of several), else uploaded apart.
    auto stacked = [&](std::initializer_list<const char*> names) {
      std::vector<HostTensor> parts;
      for (const char* name : names) parts.push_back(read(block(i, name)));
      std::vector<DeviceTensor> out;
      bool same = true;
      for (const HostTensor& t : parts) same = same && t.dtype() == parts[0].dtype();
      if (same) {
        out.push_back(device.upload(stack_rows(parts)));
      } else {
        for (const HostTensor& t : parts) out.push_back(device.upload(t));
      }
      return out;
    };
    l.qkv = stacked({"attn_q.weight", "attn_k.weight", "attn_v.weight"});
    l.attn_out = up(block(i, "attn_output.weight"));
    l.ffn_norm = up(block(i, "ffn_norm.weight"));
    l.gate_up = stacked({"ffn_gate.weight", "ffn_up.weight"});
    l.down = up(block(i, "ffn_down.weight"));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace vkformer::models::llama
