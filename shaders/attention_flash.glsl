// What flash attention (attention_flash.comp) and split-K flash decoding
// (attention_flash_decode.comp) share: the inputs, the push block, and which keys a query row
// sees with which logit. The kernel defines the boolean constants HAS_MASK, HAS_KEY_PADDING,
// HAS_KEY_LENGTH, CAUSAL and SOFT_CAP before including this, and declares its own output.
#ifndef VKF_ATTENTION_FLASH_GLSL
#define VKF_ATTENTION_FLASH_GLSL

// Absent optional inputs are bound to q and never read. q, k, v and the output are bound as
// windows of whole (batch, KV head) slices when they exceed one binding (src/ops/windows.hpp):
// bh_base says where the window starts; the mask and key padding are bound whole.
layout(set = 0, binding = 0) readonly buffer Q { T q[]; };    // [B, H, Sq, D]
#ifdef KV_QUANT
// Caches in their own types (K_TYPE, V_TYPE of kv_cache_types.glsl, declared by the kernel), read
// as 32-bit words: kv_read_k(e) and kv_read_v(e) dequantize elements e .. e + 3.
layout(set = 0, binding = 1) readonly buffer K { uint kw[]; };  // [B, Hkv, Sk, D]
layout(set = 0, binding = 2) readonly buffer V { uint vw[]; };  // [B, Hkv, Sk, DV]
#define KV_READ_FN kv_read_k
#define KV_READ_BUF kw
#define KV_READ_TYPE K_TYPE
#include "kv_cache_read.glsl"
#define KV_READ_FN kv_read_v
#define KV_READ_BUF vw
#define KV_READ_TYPE V_TYPE
#include "kv_cache_read.glsl"
#elif defined(ROPE_KV)
// The decoding kernel with the step's rope_kv_cache inside (attention_flash_decode.comp) writes
// the new row of each cache.
layout(set = 0, binding = 1) buffer K { T k[]; };    // [B, Hkv, Sk, D]
layout(set = 0, binding = 2) buffer V { T v[]; };    // [B, Hkv, Sk, DV]
#else
layout(set = 0, binding = 1) readonly buffer K { T k[]; };    // [B, Hkv, Sk, D]
layout(set = 0, binding = 2) readonly buffer V { T v[]; };    // [B, Hkv, Sk, DV]
#endif
layout(set = 0, binding = 3) readonly buffer Mask { T mask[]; };  // additive, broadcast
layout(set = 0, binding = 4) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 5) readonly buffer KeyLength { int key_length[]; };    // [1]

layout(push_constant) uniform Push {  // FlashPush in src/ops/attention_flash.cpp
  uint sq;
  uint sk;
  uint heads;
  uint q_blocks;        // flash: ceil(sq / BR) query blocks per (b, h)
  uint groups;          // workgroups of this dispatch that have work
  float scale;
  uint d;               // head dim of q and k
  uint dv;              // head dim of v
  uint mask_stride[4];  // over [B, H, Sq, Sk]; 0 where the mask broadcasts
  uint bh_base;         // the first (b, h) of the window
  uint group;           // query heads per KV head (H / Hkv)
  uint splits;          // decode: key ranges per (b, KV head)
  uint kv_batches;      // decode: batches of k and v (PER_SEQUENCE: slots, more than q's)
  float softcap;        // SOFT_CAP: the cap
  uint causal_at_length;  // causal aligned to key_length (below)
#ifdef ROPE_KV
  // RopeKvPush in src/ops/attention_flash.cpp: where the new row's q, k and v start in their
  // projections' rows, and its rope (rope_kv_cache.glsl's fields).
  uint q_stride, k_stride, v_stride;
  uint q_off, k_off, v_off;
  uint q_heads;    // H (q's heads before a grouped step is restacked)
  uint half_dims;  // rotated dims / 2
  int rope_base;   // the static position offset
  uint neox;       // pairs (i, i + dims / 2), else (2i, 2i + 1)
#endif
} p;

#include "attention_soft_cap.glsl"

// The causal limit: row i sees keys j <= i + attention_causal_shift(), the queries being the
// last sq of the sk keys, or with causal_at_length of the key_length valid ones (a KV cache's
// newest rows, whatever the cache's size; never with per-sequence lengths).
int attention_causal_shift() {
  return (HAS_KEY_LENGTH && p.causal_at_length != 0u ? key_length[0] : int(p.sk)) - int(p.sq);
}

// How many keys rows up to `last_row` (of sq) may see: key_length, read at run time so that a
// KV cache can grow between replays, and the causal limit. Keys at or past it are never loaded.
uint attention_keys_at(uint last_row, uint length_index) {
  int end = int(p.sk);
  if (HAS_KEY_LENGTH) end = min(end, key_length[length_index]);
  if (CAUSAL) end = min(end, int(last_row) + attention_causal_shift() + 1);
  return uint(max(end, 0));
}
uint attention_keys(uint last_row) { return attention_keys_at(last_row, 0u); }

// The logit of query row `row` of head (b, h) for key j, fp32, from the dot product s: s * scale
// (soft-capped with SOFT_CAP) plus the additive mask, or -inf where the key is hidden (past
// `keys`, the causal limit, key padding) or the row is past sq. A mask entry of -inf hides a key
// too.
float attention_logit(float s, uint b, uint h, uint row, uint j, uint keys) {
  bool visible = j < keys && row < p.sq;
  if (CAUSAL) visible = visible && int(j) <= int(row) + attention_causal_shift();
  if (HAS_KEY_PADDING && visible) visible = key_padding[b * p.sk + j] == 0;
  if (!visible) return NEG_INF;
  float x = attention_soft_cap(s * p.scale);
  if (HAS_MASK)
    x += float(mask[b * p.mask_stride[0] + h * p.mask_stride[1] + row * p.mask_stride[2] +
                    j * p.mask_stride[3]]);
  return x;
}

#endif
