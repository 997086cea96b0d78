#pragma once
// The llama forward pass as a Graph over the model's uploaded weights and its KV caches, for a
// fixed number of new tokens S at a run-time position p (rows p .. p+S-1 of the caches):
//   x = token_embd[ids]
//   per block: x += attn_output · attention(rope(q), cache_k, cache_v)  with q, k, v from
//              rms_norm(x) · attn_qkv, the new k (rotated) and v written into the caches first;
//              x += ffn_down · swiglu(ffn_gate · rms_norm(x), ffn_up · rms_norm(x))
//   logits = output · rms_norm(x)
// built from the fused ops (Graph::linear's pre-norm, gated pair and residual, rope_kv_cache),
// so a decoding step is six dispatches per block on devices whose kernels fuse them.
// Inputs: "tokens" i32 [1, S], "position" i32 [1] (p), "key_length" i32 [1] (p + S). With S > 1
// also "mask" [1, 1, S, T] in the activations' type: row i may see cache rows j <= p + i (0), not
// later ones (-inf); it is set for each chunk, since p changes while the graph stays recorded.
// With S > 1 and Logits::last also "last" i32 [1], the row whose logits are wanted. Output
// "logits": [1, vocab] (Logits::last) or [S, vocab] (Logits::all).
// With SlotRows (BatchedLanguageModel, batched_decode.hpp) the B rows of "tokens" [B, S] are
// separate sequences in KV slots: the caches are [slots, n_kv_heads, T, head_dim], "slot" i32 [B]
// names each row's slot, "position" and "key_length" are i32 [B], and "logits" is [B, vocab]
// (S = 1) or as above (B = 1).
#include <vector>

#include "llama/llama_weights.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::models::llama {

struct KvCaches {
  std::vector<DeviceTensor> k, v;  // per block, [1, n_kv_heads, T, head_dim]
};

enum class Logits { last, all };

// Rows of a pass that are separate sequences, each in its own slot of the caches.
struct SlotRows {
  int64_t batch = 1;  // B: sequences in the pass (S = 1 when more than one)
};

// The "mask" input [1, 1, tokens, cache_rows] for a chunk of `tokens` at `position`: row r sees the
// cache rows up to position + r (shared by every head).
HostTensor causal_mask(int64_t tokens, int64_t cache_rows, int64_t position);

Graph build_forward(const LlamaConfig& config, const LlamaWeights& weights, const KvCaches& caches,
                    int64_t tokens, Logits logits, DType activations,
                    const SlotRows* slot_rows = nullptr);

}  // namespace vkformer::models::llama
