#pragma once
// Double-precision CPU references for every kernel: straightforward loops, no shortcuts, so a
// test compares the GPU against an independent computation.
#include <cstdint>
#include <optional>
#include <vector>

namespace vkformer::ref {

using Vec = std::vector<double>;

// Row-major [batch, m, k] x [batch, k, n] (or [batch, n, k] with transpose_b); B may be shared
// across batches (b_batch = 1).
Vec matmul(const Vec& a, const Vec& b, int64_t batch, int64_t b_batch, int64_t m, int64_t n,
           int64_t k, bool transpose_b, const Vec* bias, double alpha);

struct SoftmaxMasks {
  double scale = 1.0;
  bool causal = false;
  // causal: query i sees keys j <= i + causal_end - Sq; -1: causal_end = Sk (the queries are the
  // last Sq keys)
  int64_t causal_end = -1;
  const Vec* mask = nullptr;  // additive, expanded to [B, H, Sq, Sk]
  const std::vector<int32_t>* key_padding = nullptr;  // [B, Sk]
  bool log = false;
  int64_t key_length = -1;  // keys j >= key_length are masked; -1: all Sk keys are valid
  double softcap = 0.0;     // > 0: each scaled score x becomes softcap * tanh(x / softcap)
};
// x is [B, H, Sq, Sk]; mask (if any) is already expanded to the same shape.
Vec softmax(const Vec& x, int64_t B, int64_t H, int64_t Sq, int64_t Sk, const SoftmaxMasks& m);

Vec layer_norm(const Vec& x, int64_t rows, int64_t d, const Vec& gamma, const Vec& beta, double eps);
double gelu(double x);
double relu(double x);

// [B, S, C] -> [B, H, S, D] from columns [offset, offset + H*D).
Vec split_heads(const Vec& x, int64_t B, int64_t S, int64_t C, int64_t H, int64_t D, int64_t offset);
Vec concat_heads(const Vec& x, int64_t B, int64_t H, int64_t S, int64_t D);

Vec embedding(const std::vector<int32_t>& ids, const Vec& table, int64_t d);
// The PyTorch-tutorial table: pe[pos, 2i] = sin(pos * w_i), pe[pos, 2i+1] = cos(pos * w_i),
// w_i = exp(-2i * ln(10000) / d).
double positional_encoding(int64_t pos, int64_t dim, int64_t d);

// k or v [B, Hkv, S, E] repeated to [B, H, S, E] (query head h reads KV head h / (H / Hkv)):
// grouped-query attention is attention() over these copies; the kernels read K and V in place.
Vec repeat_kv(const Vec& x, int64_t B, int64_t H, int64_t Hkv, int64_t S, int64_t E);

// softmax(q kᵀ * scale + masks) v for [B, H, Sq, D], [B, H, Sk, D], [B, H, Sk, Dv].
Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t H, int64_t Sq,
              int64_t Sk, int64_t D, int64_t Dv, const SoftmaxMasks& m);

}  // namespace vkformer::ref
