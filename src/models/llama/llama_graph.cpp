#include "llama/llama_graph.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

namespace vkformer::models::llama {

HostTensor causal_mask(int64_t tokens, int64_t cache_rows, int64_t position) {
  std::vector<float> mask(static_cast<size_t>(tokens * cache_rows));
  const float hidden = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < tokens; ++r) {
    float* row = mask.data() + r * cache_rows;
    const int64_t seen = std::min(position + r + 1, cache_rows);
    std::fill(row, row + seen, 0.0f);
    std::fill(row + seen, row + cache_rows, hidden);
  }
  return HostTensor::from_f32({1, 1, tokens, cache_rows}, mask);
}

Graph build_forward(const LlamaConfig& c, const LlamaWeights& w, const KvCaches& caches, int64_t s,
                    Logits logits, DType act, const SlotRows* slot_rows) {
  Graph g;
  const int heads = static_cast<int>(c.n_heads), kv_heads = static_cast<int>(c.n_kv_heads);
  const int64_t cache_rows = caches.k.at(0).shape()[2];
  const float eps = static_cast<float>(c.rms_eps);

  const int64_t batch = slot_rows ? slot_rows->batch : 1;
  Tensor ids = g.input("tokens", {batch, s}, DType::i32);
  Tensor position = g.input("position", {batch}, DType::i32);
  Tensor key_length = g.input("key_length", {batch}, DType::i32);
  std::optional<Tensor> slot;  // each row's cache slot
  if (slot_rows) slot = g.input("slot", {batch}, DType::i32);
  AttentionOptions attend;
  attend.key_length = key_length;
  attend.kv_slot = slot;
  // One new token sees every cached row below key_length; a chunk also needs the causal mask.
  if (s > 1) attend.mask = g.input("mask", {1, 1, s, cache_rows}, act);
  RopeOptions rope;
  rope.style = c.rope_style == LlamaConfig::RopeStyle::neox ? RopeOptions::Style::neox
                                                            : RopeOptions::Style::interleaved;
  rope.dims = c.rope_dims;
  rope.freq_base = c.rope_base;

  Tensor token_embd = g.external("token_embd.weight", w.token_embd);
  Tensor x = g.embedding(ids, token_embd);  // [B, S, d]
  if (x.dtype != act) x = g.cast(x, act);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i);
    Graph::Scope scope(g, blk);
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto weight = [&](const char* name, const DeviceTensor& t) { return g.external(blk + "." + name, t); };
    const Tensor cache_k = g.external(blk + ".cache_k", caches.k[static_cast<size_t>(i)]);
    const Tensor cache_v = g.external(blk + ".cache_v", caches.v[static_cast<size_t>(i)]);

    // Attention: the norm inside the projections, RoPE and the cache writes in one op.
    LinearOptions normed;
    normed.norm = weight("attn_norm.weight", l.attn_norm);
    normed.norm_eps = eps;
    RopeKvCache r;
    if (l.qkv.size() == 1) {
      Tensor qkv = g.linear(x, weight("attn_qkv.weight", l.qkv[0]), normed);  // [1, S, (H + 2 Hkv) hd]
      r = g.rope_kv_cache(qkv, heads, kv_heads, cache_k, cache_v, position, rope, slot);
    } else {
      r = g.rope_kv_cache(g.linear(x, weight("attn_q.weight", l.qkv[0]), normed),
                          g.linear(x, weight("attn_k.weight", l.qkv[1]), normed),
                          g.linear(x, weight("attn_v.weight", l.qkv[2]), normed), heads, kv_heads,
                          cache_k, cache_v, position, rope, slot);
    }
    // Grouped-query attention: q has n_heads heads, the caches n_kv_heads (Graph::attention maps
    // them, and stacks a decode step's group of query heads into one block by itself).
    Tensor a = g.concat_heads(g.attention(r.q, r.k_cache, r.v_cache, attend));
    LinearOptions residual;
    residual.residual = x;
    x = g.linear(a, weight("attn_output.weight", l.attn_out), residual);

    // Feed-forward: SwiGLU with the norm in the gate/up projection, the residual in down's.
    LinearOptions ffn;
    ffn.norm = weight("ffn_norm.weight", l.ffn_norm);
    ffn.norm_eps = eps;
    ffn.activation = Activation::silu;
    Tensor h;
    if (l.gate_up.size() == 1) {
      ffn.gated = true;
      h = g.linear(x, weight("ffn_gate_up.weight", l.gate_up[0]), ffn);
    } else {
      LinearOptions up = ffn;
      up.activation = Activation::none;
      h = g.mul(g.linear(x, weight("ffn_gate.weight", l.gate_up[0]), ffn),
                g.linear(x, weight("ffn_up.weight", l.gate_up[1]), up));
    }
    residual.residual = x;
    x = g.linear(h, weight("ffn_down.weight", l.down), residual);
  }
  x = g.reshape(x, {batch * s, c.d_model});
  // Only the wanted row goes through the final norm and the (largest) output projection.
  if (logits == Logits::last && s > 1) x = g.embedding(g.input("last", {1}, DType::i32), x);
  LinearOptions head;
  head.norm = g.external("output_norm.weight", w.output_norm);
  head.norm_eps = eps;
  Tensor out_w = c.tied_output ? token_embd : g.external("output.weight", w.output);
  g.output("logits", g.linear(x, out_w, head));
  return g;
}

}  // namespace vkformer::models::llama
