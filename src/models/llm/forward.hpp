#pragma once
// A decoder-only model's forward pass as a Graph over its uploaded weights and its KV caches, for
// a fixed number of new tokens S at a run-time position p (rows p .. p+S-1 of the caches):
//   x = token_embd[ids] · embedding_scale
//   per block: q, k, v = rms_norm(x) · attn_qkv (+ bias); q, k per-head rms-normed (qk_norm);
//              the new k (rotated) and v written into the caches first;
//              o = attn_output · attention(rope(q), cache_k, cache_v)  (soft-capped scores, a
//              sliding window on the sliding layers); x += o, or rms_norm(o) with post_norms
//              f = ffn_down · act(ffn_gate · rms_norm(x)) * (ffn_up · rms_norm(x)); x += f (or
//              rms_norm(f))
//   logits = output · rms_norm(x), soft-capped where the config says
// built from the fused ops (Graph::linear's pre-norm, gated pair and residual, rope_kv_cache),
// so a llama decoding step is six dispatches per block on devices whose kernels fuse them.
// Inputs: "tokens" i32 [1, S], "position" i32 [1] (p), "key_length" i32 [1] (p + S, padded rows
// included: with S > 1 row i sees cache rows j <= key_length - S + i = p + i, causal attention
// aligned to key_length). With soft-capped attention also "mask" [1, 1, S, T] in the
// activations' type: row i may see cache rows j <= p + i (0), not later ones (-inf); with sliding
// layers also "window_mask", the same limited to rows j > p + i - window. Both are set for each
// pass, since p changes while the graph stays recorded (causal_mask). With S > 1 and Logits::last
// also "last" i32 [1], the row whose logits are wanted. Output "logits": [1, vocab]
// (Logits::last) or [S, vocab] (Logits::all); with Logits::greedy instead "argmax" i32 [1, 4]:
// Graph::argmax of the last row's logits.
// With SlotRows (BatchedLanguageModel) the B rows of "tokens" [B, S] are tokens in KV slots (with
// S = 1 several rows may be consecutive tokens of one slot: every row's key and value are written
// before any row attends, and row b sees its slot's rows below key_length[b]): the caches are [slots, n_kv_heads, T, head_dim], "slot" i32 [B] names each row's slot,
// "position" and "key_length" are i32 [B], "window_mask" is [B, 1, 1, T] (S = 1: one row per
// sequence, step_window_mask) and "logits" is [B, vocab] (S = 1) or as above (B = 1). There the
// fused attention kernels soft-cap the scores themselves (AttentionOptions::softcap, reading
// each row's slot and key_length), so a one-token step takes no "mask".
#include <span>
#include <vector>

#include "llm/weights.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::models::llm {

struct KvCaches {
  std::vector<DeviceTensor> k, v;  // per block, [1, n_kv_heads, T, head_dim]
  // The attention rotation of quantized caches (KvRotation): q and k times the Hadamard matrix
  // of blocks of rotation.k, v of rotation.v, the attention output rotated back (0: none).
  KvRotation rotation;
};

// Which logits a pass returns. none: a pass that only fills the KV caches (the chunks of a prompt
// before its last): the last block's attention, its output projection and feed-forward and the
// output head, which feed only the logits, are left out, and the graph's one output,
// "caches_filled", echoes its "key_length" input (an executor needs an output). greedy: the last
// token's logits reduced on the device to greedy decoding's choice (Graph::argmax), so that a
// step reads back 16 bytes instead of the vocabulary.
enum class Logits { last, all, none, greedy };

// Rows of a pass that are separate sequences, each in its own slot of the caches.
struct SlotRows {
  int64_t batch = 1;  // B: rows in the pass (S = 1 when more than one), each at its slot and position
  // > 0: only these rows go through the output head, named by the input "logit_rows" i32
  // [logit_rows] ("logits" is [logit_rows, vocab]): a step carrying prompt rows wants the logits
  // of a few of them, and the head is the largest matmul.
  int64_t logit_rows = 0;
};

// The "mask" input [1, 1, tokens, cache_rows] for a chunk of `tokens` at `position`: row r sees the
// cache rows up to position + r (shared by every head), and with window > 0 only the last
// `window` of them ("window_mask").
HostTensor causal_mask(int64_t tokens, int64_t cache_rows, int64_t position, int64_t window = 0);

// The "window_mask" input [B, 1, 1, cache_rows] of a SlotRows step whose row b adds the token at
// positions[b] of its slot: causal_mask's row for it, so each row sees only the last `window`
// rows of its own slot up to itself, [max(0, p + 1 - window), p].
HostTensor step_window_mask(std::span<const int32_t> positions, int64_t cache_rows, int64_t window);

// Which masks a graph of `tokens` new tokens takes (slot_rows: a SlotRows graph), and whether its
// attention is causal aligned to key_length instead (then key_length must be p + tokens).
bool chunk_is_causal(const LanguageModelConfig& config, int64_t tokens, bool slot_rows = false);
bool needs_mask(const LanguageModelConfig& config, int64_t tokens, bool slot_rows = false);
bool needs_window_mask(const LanguageModelConfig& config);

// The context shift of every block's caches (Graph::rope_shift), one graph recorded once: input
// "shift" i32 [3] {keep, discard, end}; the keys turned with their layer's rope (Gemma's sliding
// layers with their own base), the values moved; output "shifted" echoes the input.
Graph build_shift(const LanguageModelConfig& config, const LanguageModelWeights& weights, const KvCaches& caches);

// The context shift of ONE slot of SlotRows caches [slots, n_kv_heads, T, head_dim] (a server's
// sequence that filled its context), the other slots untouched: input "shift" i32 [4] {keep,
// discard, end, slot}, Graph::rope_shift's one-item form, so each cache's shift is one dispatch
// over the slot's KV heads. The keys are turned as build_shift's, so the moved rows equal what
// build_shift gives a single sequence. Output "shifted" echoes the input.
Graph build_slot_shift(const LanguageModelConfig& config, const LanguageModelWeights& weights, const KvCaches& caches);

Graph build_forward(const LanguageModelConfig& config, const LanguageModelWeights& weights,
                    const KvCaches& caches, int64_t tokens, Logits logits, DType activations,
                    const SlotRows* slot_rows = nullptr);

}  // namespace vkformer::models::llm
