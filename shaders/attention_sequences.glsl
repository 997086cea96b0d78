// Attention over per-sequence KV slots (Graph::attention with kv_slot; a batched decoding step,
// one query row per sequence): batch b of q reads KV batch kv_slot[b] of k and v, which hold
// more batches (one per slot) than q, and sees key_length[b] keys. The kernel declares
// `const bool PER_SEQUENCE` (a specialization constant), `KvSlot { int kv_slot[]; }` at its own
// binding, and the push field kv_batches (k's batches) before including this. Without
// PER_SEQUENCE, kv_slot is bound to q and never read, and key_length holds one value ([1]).
#ifndef VKF_ATTENTION_SEQUENCES_GLSL
#define VKF_ATTENTION_SEQUENCES_GLSL

// Index into key_length for batch b.
uint key_length_index(uint b) { return PER_SEQUENCE ? b : 0u; }

// The (KV batch, KV head) slice that query head h of batch b reads; `window_kv` is the slice
// without per-sequence slots (the caller's index within its window). Slots outside k's batches
// are clamped (Executor::set_input refuses them; a computed index must not read out of range).
uint kv_slice(uint b, uint h, uint heads, uint group, uint kv_batches, uint window_kv) {
  if (!PER_SEQUENCE) return window_kv;
  const uint slot = uint(clamp(kv_slot[b], 0, int(kv_batches) - 1));
  return slot * (heads / group) + h / group;
}

#endif
