// Block benchmarks: transformer layers as vkformer's models build them (models::BlockBuilder,
// the same code Model runs), over random weights with fixed seeds, timed as whole graphs.
#include <cmath>
#include <cstring>

#include "blocks.hpp"  // src/models: BlockBuilder
#include "data.hpp"
#include "internal.hpp"
#include "vkformer/model.hpp"
#include "weight_store.hpp"

namespace vkformer::bench {

namespace {

using models::BlockBuilder;
using models::WeightStore;
using Path = AttentionOptions::Path;

// Rows [begin, end) of a 2-D or 1-D host tensor.
HostTensor rows(const HostTensor& t, int64_t begin, int64_t end) {
  Shape s = t.shape().rank() == 1 ? Shape{end - begin} : Shape{end - begin, t.shape()[1]};
  HostTensor out(s, t.dtype());
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.shape()[0]);
  std::memcpy(out.data(), t.data() + begin * row_bytes, out.nbytes());
  return out;
}

// Random weights for every parameter of `c` whose name starts with `prefix`: linear weights
// uniform in ±1/sqrt(fan_in) (PyTorch's default scale), norms near 1, small biases. Like
// Model's loader, the cross-attention projection is also stored split into Q and K/V rows.
WeightStore random_weights(Device& d, const ModelConfig& c, DType dt, const std::string& prefix) {
  WeightStore w;
  uint64_t seed = 1000;
  for (auto& [name, shape] : parameter_shapes(c)) {
    ++seed;
    if (!name.starts_with(prefix)) continue;
    HostTensor t;
    if (name.find("norm") != std::string::npos && name.ends_with(".weight"))
      t = random_host(shape, dt, seed, 0.9f, 1.1f);
    else if (name.ends_with("bias"))
      t = random_host(shape, dt, seed, -0.02f, 0.02f);
    else {
      const float a = 1.0f / std::sqrt(static_cast<float>(shape[shape.rank() - 1]));
      t = random_host(shape, dt, seed, -a, a);
    }
    if (name.find("multihead_attn.in_proj_") != std::string::npos) {
      const int64_t e = c.d_model;
      const std::string base = name.substr(0, name.rfind(".in_proj_"));
      const bool weight = name.ends_with("weight");
      w.add(base + (weight ? ".q_weight" : ".q_bias"), d.upload(rows(t, 0, e)));
      w.add(base + (weight ? ".kv_weight" : ".kv_bias"), d.upload(rows(t, e, 3 * e)));
    }
    w.add(name, d.upload(t));
  }
  return w;
}

// Multiply-adds of one token through one layer's weight matrices, times 2.
double linear_flops_per_token(int64_t e, int64_t ff, bool decoder) {
  return 2.0 * ((decoder ? 6.0 : 4.0) * e * e + 2.0 * e * ff);
}
double layer_weight_elements(int64_t e, int64_t ff, bool decoder) {
  return (decoder ? 8.0 : 4.0) * e * e + 2.0 * e * ff;
}

ModelConfig bert_base_layer() {
  return {.arch = ModelConfig::Arch::encoder, .d_model = 768, .nhead = 12, .dim_feedforward = 3072,
          .num_encoder_layers = 1, .num_decoder_layers = 0, .activation = Activation::gelu};
}

ModelConfig transformer_d512() {
  return {.arch = ModelConfig::Arch::transformer, .d_model = 512, .nhead = 8, .dim_feedforward = 2048,
          .num_encoder_layers = 6, .num_decoder_layers = 6, .activation = Activation::relu,
          .final_norm = true};  // nn.Transformer has one final norm per stack
}

// One nn.TransformerEncoderLayer of BERT-base size (post-norm, GELU) on [batch, seq, 768].
Benchmark encoder_layer(int64_t batch, int64_t seq, DType dt, bool quick = false) {
  const ModelConfig c = bert_base_layer();
  const int64_t e = c.d_model, ff = c.dim_feedforward;
  Benchmark b;
  b.name = "encoder_layer";
  b.variant = "bert-base";
  b.shape = {{"batch", batch}, {"seq", seq}, {"d_model", e}, {"heads", c.nhead}, {"ff", ff}};
  b.params = {{"attention", "automatic"}, {"activation", "gelu"}, {"norm", "post"}};
  b.dtype = dt;
  const double tokens = double(batch) * seq;
  b.flops = tokens * linear_flops_per_token(e, ff, false) + 4.0 * batch * double(seq) * seq * e;
  b.bytes = (layer_weight_elements(e, ff, false) + 2.0 * tokens * e) * dtype_size(dt);
  b.quick = quick;
  b.prepare = [=](Device& d) {
    WeightStore w = random_weights(d, c, dt, "");
    Graph g;
    BlockBuilder blocks(g, c, w, Path::automatic);
    Tensor x = g.external("x", random_device(d, {batch, seq, e}, dt, 7));
    return compile(d, g, blocks.encoder_stack("", x, {}));
  };
  return b;
}

// nn.Transformer(d_model 512, 8 heads, ff 2048, 6 + 6 layers).forward(src, tgt) with a causal
// target mask: the encoder stack, then the decoder stack over its output.
Benchmark transformer(int64_t batch, int64_t seq, DType dt) {
  const ModelConfig c = transformer_d512();
  const int64_t e = c.d_model, ff = c.dim_feedforward, L = c.num_encoder_layers;
  Benchmark b;
  b.name = "transformer";
  b.variant = "d512.6+6";
  b.shape = {{"batch", batch}, {"src", seq}, {"tgt", seq}, {"d_model", e}, {"layers", 2 * L}};
  b.params = {{"attention", "automatic"}, {"tgt_mask", "causal"}};
  b.dtype = dt;
  const double s = double(seq), bs = double(batch) * s;
  const double enc = bs * linear_flops_per_token(e, ff, false) + 4.0 * batch * s * s * e;
  // Decoder: self-attention (causal pairs), cross-attention (Q/out on the target, K/V on memory).
  const double dec = bs * linear_flops_per_token(e, ff, true) + 2.0 * bs * 2.0 * e * e +
                     4.0 * batch * (s * (s + 1) / 2) * e + 4.0 * batch * s * s * e;
  b.flops = L * (enc + dec);
  b.bytes = (L * (layer_weight_elements(e, ff, false) + layer_weight_elements(e, ff, true)) +
             3.0 * bs * e) * dtype_size(dt);
  b.prepare = [=](Device& d) {
    WeightStore w = random_weights(d, c, dt, "");
    Graph g;
    BlockBuilder blocks(g, c, w, Path::automatic);
    Tensor src = g.external("src", random_device(d, {batch, seq, e}, dt, 8));
    Tensor tgt = g.external("tgt", random_device(d, {batch, seq, e}, dt, 9));
    Tensor memory = blocks.encoder_stack("encoder.", src, {});
    models::AttentionMasks self;
    self.causal = true;
    return compile(d, g, blocks.decoder_stack("decoder.", tgt, memory, self, {}));
  };
  return b;
}

// One token through the d512 transformer's 6-layer decoder with KV caches, as generation runs
// it (src/models/cached_decoder.cpp): each layer appends its K/V at position context - 1 and
// attends `context` cached positions, then cross-attends a 128-token memory.
Benchmark decoder_step(int64_t batch, int64_t context, DType dt, bool quick = false) {
  const ModelConfig c = transformer_d512();
  const int64_t e = c.d_model, ff = c.dim_feedforward, L = c.num_decoder_layers, h = c.nhead;
  const int64_t src = 128;
  Benchmark b;
  b.name = "decoder_step";
  b.variant = "d512.kv-cache";
  b.shape = {{"batch", batch}, {"context", context}, {"src", src}, {"d_model", e}, {"layers", L}};
  b.params = {{"attention", "automatic"}};
  b.dtype = dt;
  b.flops = L * (batch * linear_flops_per_token(e, ff, true) + 4.0 * batch * context * e +
                 4.0 * batch * src * e);
  // Every weight once (cross K/V projections excluded: precomputed), every cache row once.
  b.bytes = L * ((layer_weight_elements(e, ff, true) - 2.0 * e * e) +
                 2.0 * batch * context * e + 2.0 * batch * src * e) * dtype_size(dt);
  b.bound = Bound::memory;
  b.quick = quick;
  b.prepare = [=](Device& d) {
    WeightStore w = random_weights(d, c, dt, "decoder.");
    Graph g;
    BlockBuilder blocks(g, c, w, Path::automatic);
    Tensor position = g.input("position", {1}, DType::i32);
    Tensor key_length = g.input("key_length", {1}, DType::i32);
    std::vector<models::LayerCache> caches;
    std::vector<std::pair<Tensor, Tensor>> cross;
    const uint64_t seed = 50;
    for (int64_t l = 0; l < L; ++l) {
      const std::string n = std::to_string(l);
      const Shape cache{batch, h, context, e / h}, memory{batch, h, src, e / h};
      const uint64_t s = seed + 4 * static_cast<uint64_t>(l);
      caches.push_back({g.external("self_k" + n, random_device(d, cache, dt, s)),
                        g.external("self_v" + n, random_device(d, cache, dt, s + 1))});
      cross.emplace_back(g.external("cross_k" + n, random_device(d, memory, dt, s + 2)),
                         g.external("cross_v" + n, random_device(d, memory, dt, s + 3)));
    }
    Tensor x = g.external("x", random_device(d, {batch, 1, e}, dt, 10));
    Tensor y = blocks.decoder_stack_step("decoder.", x, caches, cross, position, key_length);
    Prepared p = compile(d, g, y);
    const int32_t pos = static_cast<int32_t>(context - 1), len = static_cast<int32_t>(context);
    p.executor->set_input("position", HostTensor::from_i32({1}, std::vector<int32_t>{pos}));
    p.executor->set_input("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{len}));
    return p;
  };
  return b;
}

}  // namespace

std::vector<Benchmark> block_benchmarks() {
  std::vector<Benchmark> list;
  for (DType dt : {DType::f32, DType::f16})
    for (int64_t batch : {1, 8})
      for (int64_t seq : {128, 512})
        list.push_back(encoder_layer(batch, seq, dt, dt == DType::f32 && batch == 1 && seq == 128));
  for (DType dt : {DType::f32, DType::f16}) list.push_back(transformer(1, 128, dt));
  list.push_back(transformer(8, 128, DType::f32));
  for (DType dt : {DType::f32, DType::f16})
    for (int64_t context : {128, 512, 1024, 2048})
      list.push_back(decoder_step(1, context, dt, dt == DType::f32 && context == 128));
  list.push_back(decoder_step(8, 512, DType::f32));
  return list;
}

}  // namespace vkformer::bench
