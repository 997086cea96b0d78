#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkformer::ref {

Vec matmul(const Vec& a, const Vec& b, int64_t batch, int64_t b_batch, int64_t m, int64_t n,
           int64_t k, bool transpose_b, const Vec* bias, double alpha) {
  Vec out(batch * m * n);
  for (int64_t z = 0; z < batch; ++z) {
    const double* A = a.data() + z * m * k;
    const double* B = b.data() + (b_batch == 1 ? 0 : z) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += A[i * k + p] * (transpose_b ? B[j * k + p] : B[p * n + j]);
        out[(z * m + i) * n + j] = alpha * s + (bias ? (*bias)[j] : 0.0);
      }
  }
  return out;
}

Vec softmax(const Vec& x, int64_t B, int64_t H, int64_t Sq, int64_t Sk, const SoftmaxMasks& m) {
  Vec out(x.size());
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> row(Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t base = ((b * H + h) * Sq + i) * Sk;
        double mx = ninf;
        for (int64_t j = 0; j < Sk; ++j) {
          double v = x[base + j] * m.scale;
          if (m.softcap > 0) v = m.softcap * std::tanh(v / m.softcap);
          if (m.mask) v += (*m.mask)[base + j];
          if (m.causal && j > i + ((m.causal_end >= 0 ? m.causal_end : Sk) - Sq)) v = ninf;
          if (m.key_padding && (*m.key_padding)[b * Sk + j]) v = ninf;
          if (m.key_length >= 0 && j >= m.key_length) v = ninf;
          row[j] = v;
          mx = std::max(mx, v);
        }
        if (mx == ninf) {  // fully masked row: zeros (log-softmax: -inf)
          for (int64_t j = 0; j < Sk; ++j) out[base + j] = m.log ? ninf : 0.0;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < Sk; ++j) sum += std::exp(row[j] - mx);
        for (int64_t j = 0; j < Sk; ++j)
          out[base + j] = m.log ? row[j] - mx - std::log(sum) : std::exp(row[j] - mx) / sum;
      }
  return out;
}

Vec layer_norm(const Vec& x, int64_t rows, int64_t d, const Vec& gamma, const Vec& beta,
               double eps) {
  Vec out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* v = x.data() + r * d;
    double mean = 0;
    for (int64_t j = 0; j < d; ++j) mean += v[j];
    mean /= d;
    double var = 0;
    for (int64_t j = 0; j < d; ++j) var += (v[j] - mean) * (v[j] - mean);
    var /= d;  // biased, as PyTorch's LayerNorm
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j) out[r * d + j] = (v[j] - mean) * inv * gamma[j] + beta[j];
  }
  return out;
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double relu(double x) { return x < 0 ? 0.0 : x; }  // NaN stays NaN, as in PyTorch

Vec split_heads(const Vec& x, int64_t B, int64_t S, int64_t C, int64_t H, int64_t D,
                int64_t offset) {
  Vec out(B * H * S * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          out[((b * H + h) * S + s) * D + d] = x[(b * S + s) * C + offset + h * D + d];
  return out;
}

Vec concat_heads(const Vec& x, int64_t B, int64_t H, int64_t S, int64_t D) {
  Vec out(B * S * H * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          out[(b * S + s) * H * D + h * D + d] = x[((b * H + h) * S + s) * D + d];
  return out;
}

Vec embedding(const std::vector<int32_t>& ids, const Vec& table, int64_t d) {
  Vec out(ids.size() * d);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = table[ids[i] * d + j];
  return out;
}

double positional_encoding(int64_t pos, int64_t dim, int64_t d) {
  int64_t i2 = dim - (dim % 2);
  double w = std::exp(-static_cast<double>(i2) * std::log(10000.0) / static_cast<double>(d));
  return dim % 2 == 0 ? std::sin(pos * w) : std::cos(pos * w);
}

Vec repeat_kv(const Vec& x, int64_t B, int64_t H, int64_t Hkv, int64_t S, int64_t E) {
  Vec out(static_cast<size_t>(B * H * S * E));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S * E; ++i)
        out[(b * H + h) * S * E + i] = x[(b * Hkv + h / (H / Hkv)) * S * E + i];
  return out;
}

Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t H, int64_t Sq,
              int64_t Sk, int64_t D, int64_t Dv, const SoftmaxMasks& m) {
  Vec scores(B * H * Sq * Sk);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Sk; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += q[(bh * Sq + i) * D + d] * k[(bh * Sk + j) * D + d];
        scores[(bh * Sq + i) * Sk + j] = s;
      }
  Vec p = softmax(scores, B, H, Sq, Sk, m);
  Vec out(B * H * Sq * Dv);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t d = 0; d < Dv; ++d) {
        double s = 0;
        for (int64_t j = 0; j < Sk; ++j) s += p[(bh * Sq + i) * Sk + j] * v[(bh * Sk + j) * Dv + d];
        out[(bh * Sq + i) * Dv + d] = s;
      }
  return out;
}

}  // namespace vkformer::ref
