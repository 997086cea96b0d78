#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vkformer/device_tensor.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer {

// A symbolic tensor in a Graph: an id plus the shape and dtype inferred when it was built.
struct Tensor {
  uint32_t id = UINT32_MAX;
  Shape shape;
  DType dtype = DType::f32;
  uint32_t graph = 0;  // which Graph made it (tensors of one graph cannot be used in another)
  bool valid() const { return id != UINT32_MAX; }
};

// gelu: the erf form (PyTorch's default); gelu_tanh: its tanh approximation (approximate="tanh",
// Hugging Face's gelu_new and gelu_pytorch_tanh); silu: x * sigmoid(x) (Llama's FFN gate).
enum class Activation : uint8_t { none, relu, gelu, gelu_tanh, silu };

// How Graph::pool reduces the tokens of each sequence, as sentence-transformers' Pooling does.
enum class PoolMode : uint8_t {
  mean,  // sum of the kept tokens / max(their count, 1e-9)
  cls,   // the first token, whatever the mask says
  max,   // per feature, over the kept tokens (-1e9 where none is kept)
};

struct MatmulOptions {
  bool transpose_b = false;     // B is [..., N, K], as a PyTorch Linear weight [out, in]
  std::optional<Tensor> bias;   // [N], added after scaling by alpha
  float alpha = 1.0f;           // out = alpha * (A·B) + bias
  Activation activation = Activation::none;  // applied last (fused into the matmul)
};

// Graph::linear's fusions around a projection, as transformer blocks use them: computed inside
// the matmul kernel where the device's kernel takes them (quantized weights on CPU devices, one
// row: a decoding step) and by separate kernels otherwise, with the same values up to fp32
// rounding.
struct LinearOptions {
  std::optional<Tensor> bias;                // [N] ([2N] when gated: the gate's, then the up's)
  Activation activation = Activation::none;  // applied last, or to the gate when gated
  // Pre-norm: the projection reads rms_norm(x, *norm, norm_eps) instead of x (Llama's RMSNorm;
  // norm is [K] in x's dtype). Fused, the normalized row is never stored.
  std::optional<Tensor> norm;
  float norm_eps = 1e-5f;
  // Gated pair (GLU): weight is [2N, K], rows [0, N) the gate and [N, 2N) the up projection, and
  // out [..., N] = activation(x·gateᵀ + bias[:N]) * (x·upᵀ + bias[N:]) (SwiGLU with silu).
  bool gated = false;
  // Residual: out = residual + the above (residual has out's shape and dtype).
  std::optional<Tensor> residual;
};

struct SoftmaxOptions {
  float scale = 1.0f;    // logits are multiplied by it before masks are applied
  bool causal = false;   // key j is masked for query i when j > i + (Sk - Sq) (bottom-right aligned)
  // Additive float mask broadcast (numpy rules) against the input; -inf entries mask fully.
  std::optional<Tensor> mask;
  // Boolean key-padding mask as i32 [B, Sk], nonzero = ignore that key; broadcast over heads and
  // queries. The input must then be [B, Sq, Sk] or [B, H, Sq, Sk].
  std::optional<Tensor> key_padding_mask;
  bool log = false;      // log-softmax instead of softmax
};

struct AttentionOptions {
  float scale = 0.0f;    // 0 means 1/sqrt(head_dim)
  // Query i sees keys j <= i + Sk - Sq: the queries are the last Sq of the keys.
  bool causal = false;
  // With causal and key_length (not kv_slot): the queries are the last Sq of the key_length
  // valid keys instead, j <= i + key_length - Sq, read at run time (a prompt chunk at any
  // position of a KV cache, without an [Sq, Sk] mask to build, upload and read).
  bool causal_at_key_length = false;
  std::optional<Tensor> mask;              // additive, broadcast against [B, H, Sq, Sk]
  std::optional<Tensor> key_padding_mask;  // i32 [B, Sk], nonzero = ignore
  // Query positions i attend keys j < key_length only (KV caches): i32 [1] tensor holding the
  // number of valid keys; by default all Sk keys are valid. With kv_slot: i32 [B], one count
  // per batch item.
  std::optional<Tensor> key_length;
  // Per-sequence KV slots (a batched decoding step): i32 [B], batch b of q reads batch
  // kv_slot[b] of k and v, which may then have any number of batches (one per slot). Needs
  // key_length [B]; taken by the fused kernels only (an unsupported error where none fits), with
  // k and v within one binding.
  std::optional<Tensor> kv_slot;
  // > 0: each score q·kᵀ · scale becomes softcap · tanh(score / softcap) before the mask is added
  // (Gemma 2's attention soft-capping). Taken by the fused kernels only (an unsupported error
  // where none fits, or with Path::unfused).
  float softcap = 0.0f;
  enum class Path : uint8_t { automatic, fused, unfused } path = Path::automatic;
};

// Which column pairs rotary embeddings rotate:
//   interleaved: pairs (2i, 2i + 1), GGUF/llama.cpp's "normal" mode (GPT-J, Llama);
//   neox: pairs (i, i + dims / 2), Hugging Face's rotate_half (GPT-NeoX, Qwen, Gemma, Phi-3).
enum class RopeStyle : uint8_t { interleaved, neox };

// Rotary position embedding (RoPE) on x [B, H, S, D]: the row at sequence index s has position
// pos = offset + offset_tensor[0] + s, and column pairs are rotated by theta_i = pos *
// freq_scale * freq_base^(-2i / dims) / freq_factors[i], i < dims / 2; the last D - dims columns
// pass through unchanged.
struct RopeOptions {
  using Style = RopeStyle;
  Style style = Style::interleaved;
  int64_t dims = -1;  // rotated columns, even, <= D; -1 means D
  double freq_base = 10000.0;
  // Linear position interpolation (Hugging Face's rope_type "linear", GGUF rope.scaling.type
  // "linear"): 1 / factor.
  double freq_scale = 1.0;
  // Per-pair divisors of the frequencies, dims / 2 of them, or none (llama.cpp's rope_freqs
  // tensor: Llama 3.1's "llama3" scaling).
  std::vector<float> freq_factors;
  int64_t offset = 0;  // position of the first row
  // i32 [1]: a position offset read at run time (decoding). A graph input or constant must keep
  // every position in [0, 2^24) (exact in fp32; Executor::set_input checks an input).
  std::optional<Tensor> offset_tensor;
};

// Graph::rope_kv_cache's results: the rotated queries [B, H, S, D] and the two caches after the
// write (ops that read them see the new rows).
struct RopeKvCache {
  Tensor q, k_cache, v_cache;
};

// The attention rotation of quantized caches (llama.cpp's, PR 21038): rope_kv_cache multiplies
// each rotated query and key row by the orthonormal Walsh-Hadamard matrix H of `k` (a block of
// k values, a power of two dividing the head dim; 0: none) before the key is stored, and each
// value row by that of `v`, so q·kᵀ is unchanged (H·Hᵀ = I) while a channel of large values is
// spread over the block that quantizes it. With v > 0 the attention output is v's rotation of
// the true one: Graph::hadamard(out, v) turns it back (H·H = I).
struct KvRotation {
  int k = 0, v = 0;
};

struct PositionalEncodingOptions {
  float input_scale = 1.0f;            // out = x * input_scale + PE[offset + s]
  int64_t offset = 0;                  // position of the first row
  // i32 [1]: a position offset read at run time (decoding). From a graph input or a constant it
  // must keep every row in the table: 0 <= offset + offset_tensor[0] and
  // offset + offset_tensor[0] + S <= max_len (Executor::set_input checks an input; one computed
  // on the device is clamped).
  std::optional<Tensor> offset_tensor;
  int64_t max_len = 5000;              // size of the encoding table
};

class GraphImpl;

// Builds a graph of tensor ops. Every op infers its output's shape when it is added and throws a
// vkformer::Error naming the op and the offending shapes if they do not fit.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // Sources of data.
  Tensor input(const std::string& name, const Shape& shape, DType dtype = DType::f32);
  Tensor constant(const std::string& name, HostTensor value);  // uploaded once, at compile
  Tensor external(const std::string& name, DeviceTensor tensor);  // bound, never copied
  void output(const std::string& name, Tensor t);
  // Make `t` be computed directly into `target` (a device tensor of the same shape and dtype),
  // so another graph can read it without a round trip through the host.
  void output_to(Tensor t, const Tensor& external_target);

  // Linear algebra. b (linear's weight) may also be stored as bf16 or a quantized dtype
  // (vkformer/quant_types.def), or in the other float dtype than a: then it must be [N, K]
  // used transposed (linear, or transpose_b), K whole blocks when quantized (32 elements, 256
  // for the k-quants), and it is dequantized on the fly (fp32 accumulation).
  Tensor matmul(Tensor a, Tensor b, const MatmulOptions& options = {});
  Tensor linear(Tensor x, Tensor weight, std::optional<Tensor> bias = {},
                Activation activation = Activation::none);
  // x·weightᵀ with the fusions of LinearOptions (weight as linear's above).
  Tensor linear(Tensor x, Tensor weight, const LinearOptions& options);
  Tensor scale(Tensor x, float alpha);
  // cap * tanh(x / cap) (Gemma 2's logit soft-capping): |out| < cap, ~x for |x| << cap; cap > 0.
  Tensor soft_cap(Tensor x, float cap);
  // x times the orthonormal Walsh-Hadamard matrix of `block` (a power of two from 2 to 1024
  // dividing the last dim) per block of that many consecutive elements: KvRotation's undoing.
  Tensor hadamard(Tensor x, int block);

  // Attention pieces.
  Tensor softmax(Tensor x, const SoftmaxOptions& options = {});
  // [B, S, C] -> [B, H, S, D] taking columns [offset, offset + H*D) of the last dim; width is H*D
  // (default C - offset). Both are copies where the layouts differ and views where they do not
  // (one position or one head; a single row, as in a decoding step at batch 1), with the same
  // exception as reshape.
  Tensor split_heads(Tensor x, int heads, int64_t width = -1, int64_t offset = 0);
  Tensor concat_heads(Tensor x);  // [B, H, S, D] -> [B, S, H*D]
  // softmax(Q·Kᵀ·scale + masks)·V on [B, H, Sq, D] / [B, Hkv, Sk, D] / [B, Hkv, Sk, Dv]. Hkv
  // divides H (grouped-query attention; Hkv = H is multi-head): query head h reads KV head
  // h / (H / Hkv) in place.
  Tensor attention(Tensor q, Tensor k, Tensor v, const AttentionOptions& options = {});

  // Elementwise and normalization.
  Tensor add(Tensor a, Tensor b);  // numpy broadcasting
  Tensor mul(Tensor a, Tensor b);  // elementwise product, numpy broadcasting (e.g. b one row)
  Tensor silu(Tensor x);           // x * sigmoid(x)
  // silu(gate) * up in one kernel (Llama's SwiGLU FFN); gate and up have the same shape and dtype.
  Tensor swiglu(Tensor gate, Tensor up);
  // x * rsqrt(mean(x^2) + eps) * weight over the last dim (Llama's RMSNorm; weight [D]).
  Tensor rms_norm(Tensor x, Tensor weight, float eps = 1e-5f);
  // residual + rms_norm(x, weight, eps) in one kernel (Gemma's post-norms, whose outputs are
  // added to the residual stream: the normed x is not stored). residual has x's shape and dtype.
  Tensor rms_norm_add(Tensor x, Tensor weight, Tensor residual, float eps = 1e-5f);
  // Per-head RMS norms of a packed qkv projection [..., (H + 2 Hkv) D] (as rope_kv_cache's
  // packed form takes it): each token's H query heads normed with q_weight [D], its Hkv key heads
  // with k_weight [D], its value heads unchanged; one kernel (Qwen3's and Gemma 3's q/k norms).
  Tensor rms_norm_qk(Tensor qkv, int heads, int kv_heads, Tensor q_weight, Tensor k_weight,
                     float eps = 1e-5f);
  Tensor rope(Tensor x, const RopeOptions& options = {});
  Tensor layer_norm(Tensor x, Tensor gamma, Tensor beta, float eps = 1e-5f);
  // layer_norm(a + b, gamma, beta, eps) in one kernel (a post-norm residual: the sum is not
  // stored). a and b have the same shape and dtype.
  Tensor add_layer_norm(Tensor a, Tensor b, Tensor gamma, Tensor beta, float eps = 1e-5f);
  Tensor gelu(Tensor x);  // erf form, as PyTorch's default
  Tensor relu(Tensor x);
  Tensor cast(Tensor x, DType to);  // f32 <-> f16
  // Rows of the last dim divided by their L2 norm: x / max(||x||, eps) (torch's F.normalize).
  Tensor l2_normalize(Tensor x, float eps = 1e-12f);

  // Sentence pooling: x [B, S, D] -> [B, D] over the tokens that `attention_mask` (i32 [B, S])
  // keeps. The mask has Hugging Face's meaning: nonzero = a token, 0 = padding.
  Tensor pool(Tensor x, Tensor attention_mask, PoolMode mode);

  // Embeddings.
  // ids i32 [...], table [V, D] -> [..., D]. The table may be f32/f16 (a constant or a computed
  // activation; the output has its dtype), bf16 or quantized (dequantized to f32 rows).
  Tensor embedding(Tensor ids, Tensor table);
  Tensor positional_encoding(Tensor x, const PositionalEncodingOptions& options = {});

  // A view (no data movement), except of an external that the graph writes in place (an
  // output_to target or a KV cache): then a copy, so that it keeps the contents it had here.
  Tensor reshape(Tensor x, const Shape& shape);
  Tensor copy(Tensor x);  // a new value with the same contents

  // KV caches: writes `rows` [B, H, n, D] into `cache` [B, H, T, D] (a tensor made by
  // Graph::external) at rows [p, p + n) where p = position[0] (an i32 [1] tensor read at run
  // time), and returns the cache after the write. Ops that read the returned tensor see the new
  // rows. A graph-input position outside [0, T - n] is rejected by Executor::set_input.
  Tensor update_cache(Tensor cache, Tensor rows, Tensor position);
  // A decoder step's attention inputs in one kernel: RoPE on the new queries and keys, the keys
  // and values written into the caches [B, Hkv, T, D] at rows [p, p + S) (p = position[0], as
  // update_cache), and the queries returned as [B, H, S, D]. Row s rotates at position
  // p + rope.offset + s (rope.offset_tensor must be empty: position is the offset).
  //   packed: qkv [B, S, (H + 2 Hkv) D], each row the H query heads, then the Hkv key heads, then
  //           the Hkv value heads (one fused projection);
  //   apart:  q [B, S, H D], k and v [B, S, Hkv D].
  // H is a multiple of Hkv (grouped-query attention). Equivalent to rope (q and k), split_heads
  // and update_cache (k and v).
  // Per-sequence KV slots (a batched decoding step): with cache_slot (i32 [B]), batch item b
  // writes into batch cache_slot[b] of the caches, which may then have any number of batches,
  // and position holds one value per item (i32 [B]); the caches must fit one binding.
  // With `rotation`, the rotated queries and the stored keys are multiplied by its Hadamard
  // block and the values by its own (KvRotation).
  RopeKvCache rope_kv_cache(Tensor qkv, int heads, int kv_heads, Tensor cache_k, Tensor cache_v,
                            Tensor position, const RopeOptions& rope,
                            std::optional<Tensor> cache_slot = {}, const KvRotation& rotation = {});
  RopeKvCache rope_kv_cache(Tensor q, Tensor k, Tensor v, int heads, int kv_heads, Tensor cache_k,
                            Tensor cache_v, Tensor position, const RopeOptions& rope,
                            std::optional<Tensor> cache_slot = {}, const KvRotation& rotation = {});

  // The context shift of a KV cache [B, Hkv, T, D] (an external), in place: with shift = i32 [3]
  // {keep, discard, end} read at run time, rows [keep + discard, end) of every slice move down
  // to [keep, end - discard), forgetting the tokens at [keep, keep + discard) (llama.cpp's
  // context shift). With `rope` (a key cache) each moved key is turned by the position change,
  // so that it equals the key rope_kv_cache would write at its new position: a quantized key
  // dequantized, taken out of the attention rotation of block `rotation` (KvRotation::k; 0:
  // none), turned, rotated back and quantized again. Without rope (values) the rows move as
  // they are. With shift = i32 [4] {keep, discard, end, item} only the slices of batch item
  // `item` (its Hkv heads) move, in one dispatch, the other items' rows untouched (an item out
  // of [0, B) moves nothing). Returns the cache after the move.
  Tensor rope_shift(Tensor cache, Tensor shift, const std::optional<RopeOptions>& rope, int rotation = 0);

  // Greedy decoding's choice, so that the host reads 16 bytes instead of a row of logits: x
  // [..., n] (f32 or f16) -> i32 [rows, 4], per row of the last dim {the index of the largest
  // value (equal values: the lowest index, as Sampler ranks them; NaN never wins; -1 where every
  // entry is NaN or -inf), that value's float bits, the index of the first NaN or +-inf entry
  // (-1: none), that entry's float bits}. One workgroup per row.
  Tensor argmax(Tensor x);

  // Ops added inside a scope are labelled "<scope>/<op>" in profiles and errors.
  class Scope {
   public:
    Scope(Graph& g, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GraphImpl* graph_;  // the graph's state, which a move of the Graph takes along
  };

  // Both throw invalid_argument on a moved-from Graph (std::move leaves it empty).
  const GraphImpl& impl() const;
  GraphImpl& impl();

 private:
  std::unique_ptr<GraphImpl> impl_;
};

}  // namespace vkformer
