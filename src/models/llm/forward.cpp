#include "llm/forward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "vkformer/error.hpp"

namespace vkformer::models::llm {

namespace {

// The mask row of a token at `position`: cache rows [first, position] visible (0), the rest -inf;
// first is 0, or with window > 0 the first of the last `window` rows up to the token.
void fill_mask_row(float* row, int64_t cache_rows, int64_t position, int64_t window) {
  const int64_t seen = std::min(position + 1, cache_rows);
  const int64_t first = window > 0 ? std::clamp<int64_t>(position + 1 - window, 0, seen) : 0;
  std::fill(row, row + cache_rows, -std::numeric_limits<float>::infinity());
  std::fill(row + first, row + seen, 0.0f);
}

}  // namespace

HostTensor causal_mask(int64_t tokens, int64_t cache_rows, int64_t position, int64_t window) {
  std::vector<float> mask(static_cast<size_t>(tokens * cache_rows));
  for (int64_t r = 0; r < tokens; ++r) fill_mask_row(mask.data() + r * cache_rows, cache_rows, position + r, window);
  return HostTensor::from_f32({1, 1, tokens, cache_rows}, mask);
}

HostTensor step_window_mask(std::span<const int32_t> positions, int64_t cache_rows, int64_t window) {
  const int64_t rows = static_cast<int64_t>(positions.size());
  std::vector<float> mask(static_cast<size_t>(rows * cache_rows));
  for (int64_t r = 0; r < rows; ++r)
    fill_mask_row(mask.data() + r * cache_rows, cache_rows, positions[static_cast<size_t>(r)], window);
  return HostTensor::from_f32({rows, 1, 1, cache_rows}, mask);
}

// One new token sees every cached row below key_length. A chunk's rows see the rows up to their
// own: a chunk of a SlotRows pass through the causal mask; one of a single sequence through
// causal attention aligned to key_length = p + S (chunk_is_causal: no mask to build, upload and
// read per score; with it SmolLM2's chunk attention took 1.8x as long on lavapipe, and every
// key block up to p + S instead of the block's last row). Soft-capped attention built from
// matmuls (without key_length) always needs the mask; SlotRows' passes soft-cap inside the
// fused attention kernels, which read key_length.
bool chunk_is_causal(const LanguageModelConfig& c, int64_t tokens, bool slot_rows) {
  return tokens > 1 && !slot_rows && c.attn_softcap <= 0;
}

bool needs_mask(const LanguageModelConfig& c, int64_t tokens, bool slot_rows) {
  return (tokens > 1 && !chunk_is_causal(c, tokens, slot_rows)) || (c.attn_softcap > 0 && !slot_rows);
}

bool needs_window_mask(const LanguageModelConfig& c) {
  return c.sliding_window > 0 && std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) != c.sliding_layers.end();
}

namespace {

// softmax(cap · tanh(q·kᵀ · scale / cap) + mask) · v: Gemma 2's soft-capped attention for one
// sequence, from matmuls over the whole cache (the mask hides rows past the position). q
// [1, H, S, D] is viewed as [1, Hkv, G·S, D], each KV head's G query heads one after the other,
// so that every matmul reads the caches [1, Hkv, T, D] in place. SlotRows passes, whose rows read
// their own slots, soft-cap inside the fused kernels instead (AttentionOptions::softcap).
Tensor soft_capped_attention(Graph& g, const RopeKvCache& r, int64_t heads, int64_t kv_heads, int64_t s,
                             double scale, double cap, const Tensor& mask) {
  const int64_t d = r.q.shape[3], t = r.k_cache.shape[2], group = heads / kv_heads;
  MatmulOptions qk;
  qk.transpose_b = true;
  qk.alpha = static_cast<float>(scale);
  Tensor scores = g.matmul(g.reshape(r.q, {1, kv_heads, group * s, d}), r.k_cache, qk);
  scores = g.soft_cap(scores, static_cast<float>(cap));
  SoftmaxOptions masked;
  masked.mask = mask;  // [1, 1, S, T] against [Hkv, G, S, T]
  Tensor probs = g.softmax(g.reshape(scores, {kv_heads, group, s, t}), masked);
  Tensor out = g.matmul(g.reshape(probs, {1, kv_heads, group * s, t}), r.v_cache);
  return g.reshape(out, {1, heads, s, d});
}

// [B, S, H·hd] rms-normed per head (weight [hd]).
Tensor per_head_norm(Graph& g, Tensor x, int64_t heads, const Tensor& weight, float eps) {
  const int64_t b = x.shape[0], s = x.shape[1], hd = weight.shape[0];
  return g.reshape(g.rms_norm(g.reshape(x, {b, s, heads, hd}), weight, eps), {b, s, heads * hd});
}

}  // namespace

namespace {

// The rope of the global layers and of the sliding ones (Gemma 3: a base of their own, without
// the global layers' scaling).
std::pair<RopeOptions, RopeOptions> layer_ropes(const LanguageModelConfig& c, const LanguageModelWeights& w) {
  RopeOptions rope;
  rope.style = c.rope_style;
  rope.dims = c.rope_dims;
  rope.freq_base = c.rope_base;
  rope.freq_scale = c.rope_freq_scale;
  rope.freq_factors = w.rope_freqs;
  RopeOptions rope_sliding = rope;
  if (c.rope_base_sliding > 0) {
    rope_sliding.freq_base = c.rope_base_sliding;
    rope_sliding.freq_scale = 1.0;
    rope_sliding.freq_factors.clear();
  }
  return {rope, rope_sliding};
}

}  // namespace

namespace {

// build_shift's and build_slot_shift's graph: input "shift" of `values` i32 (3: every slice of
// the caches; 4: one slot's, Graph::rope_shift's item).
Graph shift_graph(const LanguageModelConfig& c, const LanguageModelWeights& w, const KvCaches& caches, int64_t values) {
  Graph g;
  Tensor shift = g.input("shift", {values}, DType::i32);
  const auto [rope, rope_sliding] = layer_ropes(c, w);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i);
    const bool sliding = c.sliding_window > 0 && c.sliding_layers[static_cast<size_t>(i)];
    g.rope_shift(g.external(blk + ".cache_k", caches.k[static_cast<size_t>(i)]), shift, sliding ? rope_sliding : rope,
                 caches.rotation.k);
    g.rope_shift(g.external(blk + ".cache_v", caches.v[static_cast<size_t>(i)]), shift, std::nullopt);
  }
  g.output("shifted", shift);
  return g;
}

}  // namespace

Graph build_shift(const LanguageModelConfig& c, const LanguageModelWeights& w, const KvCaches& caches) {
  return shift_graph(c, w, caches, 3);
}

Graph build_slot_shift(const LanguageModelConfig& c, const LanguageModelWeights& w, const KvCaches& caches) {
  return shift_graph(c, w, caches, 4);
}

Graph build_forward(const LanguageModelConfig& c, const LanguageModelWeights& w, const KvCaches& caches, int64_t s,
                    Logits logits, DType act, const SlotRows* slot_rows) {
  Graph g;
  const int heads = static_cast<int>(c.n_heads), kv_heads = static_cast<int>(c.n_kv_heads);
  const int64_t cache_rows = caches.k.at(0).shape()[2];
  const float eps = static_cast<float>(c.rms_eps);
  const double scale = c.attention_scale > 0 ? c.attention_scale : 0.0;  // 0: the op's 1/sqrt(hd)

  const int64_t batch = slot_rows ? slot_rows->batch : 1;
  Tensor ids = g.input("tokens", {batch, s}, DType::i32);
  Tensor position = g.input("position", {batch}, DType::i32);
  Tensor key_length = g.input("key_length", {batch}, DType::i32);
  std::optional<Tensor> slot;  // each row's cache slot
  if (slot_rows) slot = g.input("slot", {batch}, DType::i32);
  AttentionOptions attend;
  attend.key_length = key_length;
  attend.kv_slot = slot;
  attend.scale = static_cast<float>(scale);
  // With SlotRows soft-capping is the fused kernel's (the matmuls of soft_capped_attention would
  // read k and v by q's batch, not by slot), and so it is with caches in another type than the
  // activations (quantized: only the fused kernels read them).
  const bool fused_softcap = slot_rows || caches.k.at(0).dtype() != act || caches.v.at(0).dtype() != act;
  if (fused_softcap) attend.softcap = static_cast<float>(c.attn_softcap);
  if (needs_mask(c, s, slot_rows != nullptr)) attend.mask = g.input("mask", {1, 1, s, cache_rows}, act);
  if (chunk_is_causal(c, s, slot_rows != nullptr)) {
    attend.causal = true;
    attend.causal_at_key_length = true;
  }
  // A step's rows sit at positions of their own: a window mask row each ([B, 1, 1, T], S = 1).
  AttentionOptions attend_window = attend;
  if (needs_window_mask(c))
    attend_window.mask = g.input("window_mask", {batch, 1, s, cache_rows}, act);
  const auto [rope, rope_sliding] = layer_ropes(c, w);

  Tensor token_embd = g.external("token_embd.weight", w.token_embd);
  Tensor x = g.embedding(ids, token_embd);  // [B, S, d]
  if (x.dtype != act) x = g.cast(x, act);
  if (c.embedding_scale != 1.0) x = g.scale(x, static_cast<float>(c.embedding_scale));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i);
    Graph::Scope scope(g, blk);
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const bool sliding = c.sliding_window > 0 && c.sliding_layers[static_cast<size_t>(i)];
    auto weight = [&](const char* name, const DeviceTensor& t) { return g.external(blk + "." + name, t); };
    const Tensor cache_k = g.external(blk + ".cache_k", caches.k[static_cast<size_t>(i)]);
    const Tensor cache_v = g.external(blk + ".cache_v", caches.v[static_cast<size_t>(i)]);

    // Attention: the norm inside the projections (one where q, k and v have one weight type),
    // the q/k norms in one op, RoPE and the cache writes in one op.
    LinearOptions normed;
    normed.norm = weight("attn_norm.weight", l.attn_norm);
    normed.norm_eps = eps;
    const RopeOptions& layer_rope = sliding ? rope_sliding : rope;
    RopeKvCache r;
    if (l.qkv.size() == 1) {
      if (!l.qkv_bias.empty()) normed.bias = weight("attn_qkv.bias", l.qkv_bias[0]);
      Tensor qkv = g.linear(x, weight("attn_qkv.weight", l.qkv[0]), normed);  // [1, S, (H + 2 Hkv) hd]
      if (c.qk_norm)
        qkv = g.rms_norm_qk(qkv, heads, kv_heads, weight("attn_q_norm.weight", l.q_norm),
                            weight("attn_k_norm.weight", l.k_norm), eps);
      r = g.rope_kv_cache(qkv, heads, kv_heads, cache_k, cache_v, position, layer_rope, slot, caches.rotation);
    } else {
      auto project = [&](int j, const char* name, const char* bias) {
        LinearOptions o = normed;
        if (!l.qkv_bias.empty()) o.bias = weight(bias, l.qkv_bias[static_cast<size_t>(j)]);
        return g.linear(x, weight(name, l.qkv[static_cast<size_t>(j)]), o);
      };
      Tensor q = project(0, "attn_q.weight", "attn_q.bias"), k = project(1, "attn_k.weight", "attn_k.bias");
      if (c.qk_norm) {
        q = per_head_norm(g, q, heads, weight("attn_q_norm.weight", l.q_norm), eps);
        k = per_head_norm(g, k, kv_heads, weight("attn_k_norm.weight", l.k_norm), eps);
      }
      r = g.rope_kv_cache(q, k, project(2, "attn_v.weight", "attn_v.bias"), heads, kv_heads, cache_k, cache_v,
                          position, layer_rope, slot, caches.rotation);
    }
    if (logits == Logits::none && i + 1 == c.n_layers) {  // the caches are written: nothing else is wanted
      g.output("caches_filled", key_length);
      return g;
    }
    // Grouped-query attention: q has n_heads heads, the caches n_kv_heads (Graph::attention maps
    // them, and stacks a decode step's group of query heads into one block by itself).
    const AttentionOptions& layer_attend = sliding ? attend_window : attend;
    Tensor a = c.attn_softcap > 0 && !fused_softcap
                   ? soft_capped_attention(g, r, heads, kv_heads, s,
                                           scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
                                           c.attn_softcap, *layer_attend.mask)
                   : g.attention(r.q, r.k_cache, r.v_cache, layer_attend);
    a = g.concat_heads(a);
    if (caches.rotation.v > 0) a = g.hadamard(a, caches.rotation.v);  // v was stored rotated
    // The residual inside the output projection, or in the post-norm's kernel (Gemma).
    auto add_to_stream = [&](Tensor h, const char* name, const DeviceTensor& wt, const char* post_name,
                             const DeviceTensor& post) {
      if (!c.post_norms) {
        LinearOptions residual;
        residual.residual = x;
        return g.linear(h, weight(name, wt), residual);
      }
      return g.rms_norm_add(g.linear(h, weight(name, wt)), weight(post_name, post), x, eps);
    };
    x = add_to_stream(a, "attn_output.weight", l.attn_out, "post_attention_norm.weight", l.attn_post_norm);

    // Feed-forward: a gated pair (SwiGLU or GeGLU) with the norm in the gate/up projection.
    LinearOptions ffn;
    ffn.norm = weight("ffn_norm.weight", l.ffn_norm);
    ffn.norm_eps = eps;
    ffn.activation = c.ffn_activation;
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
    x = add_to_stream(h, "ffn_down.weight", l.down, "post_ffw_norm.weight", l.ffn_post_norm);
  }
  x = g.reshape(x, {batch * s, c.d_model});
  // Only the wanted row goes through the final norm and the (largest) output projection.
  if ((logits == Logits::last || logits == Logits::greedy) && s > 1) x = g.embedding(g.input("last", {1}, DType::i32), x);
  if (slot_rows && slot_rows->logit_rows > 0)
    x = g.embedding(g.input("logit_rows", {slot_rows->logit_rows}, DType::i32), x);
  LinearOptions head;
  head.norm = g.external("output_norm.weight", w.output_norm);
  head.norm_eps = eps;
  Tensor out_w = c.tied_output ? token_embd : g.external("output.weight", w.output);
  Tensor out = g.linear(x, out_w, head);
  if (c.final_softcap > 0) out = g.soft_cap(out, static_cast<float>(c.final_softcap));
  if (logits == Logits::greedy)
    g.output("argmax", g.argmax(out));
  else
    g.output("logits", out);
  return g;
}

}  // namespace vkformer::models::llm
