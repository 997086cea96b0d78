// The one place that lists every op family. Adding a family: write src/ops/<family>.cpp with its
// Graph builder methods and lowerings, declare and call its register function here.
#include "lowering.hpp"

namespace vkformer {

void register_elementwise_ops(OpRegistry& r);   // add, mul, swiglu, scale, relu, gelu, silu, cast
void register_matmul_ops(OpRegistry& r);        // matmul, linear
void register_softmax_ops(OpRegistry& r);       // softmax, log-softmax with masks
void register_attention_ops(OpRegistry& r);     // fused and unfused attention
void register_heads_ops(OpRegistry& r);         // split_heads, concat_heads
void register_layer_norm_ops(OpRegistry& r);    // layer_norm
void register_embedding_ops(OpRegistry& r);     // embedding, positional_encoding
void register_cache_ops(OpRegistry& r);         // update_cache (KV caches)
void register_pooling_ops(OpRegistry& r);       // pool, l2_normalize (sentence embeddings)
void register_rms_norm_ops(OpRegistry& r);      // rms_norm (Llama)
void register_rope_ops(OpRegistry& r);          // rope, rotary position embeddings (Llama)
void register_rope_kv_cache_ops(OpRegistry& r); // rope_kv_cache: rope and KV-cache writes at once
void register_hadamard_ops(OpRegistry& r);      // hadamard: the attention rotation of quantized caches
void register_rope_shift_ops(OpRegistry& r);    // rope_shift: a KV cache's context shift, in place
void register_argmax_ops(OpRegistry& r);        // argmax: greedy decoding's choice on the device

void register_builtin_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_matmul_ops(r);
  register_softmax_ops(r);
  register_attention_ops(r);
  register_heads_ops(r);
  register_layer_norm_ops(r);
  register_embedding_ops(r);
  register_cache_ops(r);
  register_pooling_ops(r);
  register_rms_norm_ops(r);
  register_rope_ops(r);
  register_rope_kv_cache_ops(r);
  register_hadamard_ops(r);
  register_rope_shift_ops(r);
  register_argmax_ops(r);
}

}  // namespace vkformer
