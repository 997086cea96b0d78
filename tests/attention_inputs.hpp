// What the attention suites (attention_test, flash_attention_test, kv_quant_test) build the same
// way: random q, k and v as graph inputs, a key_length input, and the double-precision reference
// over them (grouped heads repeated for it).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reference.hpp"
#include "test_util.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

// q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv].
struct AttentionDims {
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
};

// Random q and k in [-1.5, 1.5], v in [-1, 1] (seeds 1, 2, 3), the graph's inputs "q", "k", "v"
// in `dtype`, with their values in `inputs`.
struct RandomQkv {
  AttentionDims dims;
  DType dtype;
  std::vector<float> q_values, k_values, v_values;
  Tensor q, k, v;

  RandomQkv(Graph& g, std::map<std::string, HostTensor>& inputs, const AttentionDims& d, DType dt)
      : dims(d), dtype(dt) {
    const Shape qs{d.B, d.H, d.Sq, d.D}, ks{d.B, d.Hkv, d.Sk, d.D}, vs{d.B, d.Hkv, d.Sk, d.Dv};
    q_values = random_values(static_cast<size_t>(qs.numel()), 1, -1.5f, 1.5f);
    k_values = random_values(static_cast<size_t>(ks.numel()), 2, -1.5f, 1.5f);
    v_values = random_values(static_cast<size_t>(vs.numel()), 3, -1.0f, 1.0f);
    q = g.input("q", qs, dt), k = g.input("k", ks, dt), v = g.input("v", vs, dt);
    inputs.emplace("q", make_tensor(qs, q_values, dt));
    inputs.emplace("k", make_tensor(ks, k_values, dt));
    inputs.emplace("v", make_tensor(vs, v_values, dt));
  }

  // softmax(q kᵀ scale + masks) v in double, on the values as stored in `dtype`.
  std::vector<double> reference(const ref::SoftmaxMasks& m) const {
    const AttentionDims& d = dims;
    return ref::attention(stored(q_values, dtype), ref::repeat_kv(stored(k_values, dtype), d.B, d.H, d.Hkv, d.Sk, d.D),
                          ref::repeat_kv(stored(v_values, dtype), d.B, d.H, d.Hkv, d.Sk, d.Dv), d.B, d.H, d.Sq,
                          d.Sk, d.D, d.Dv, m);
  }
};

// The scale (0: 1 / sqrt(D), the op's default, in fp32) and causal masking (aligned to the case's
// key_length when causal_at_key_length) of an attention case, on the op's options and the
// reference's masks alike.
template <class Case>
void set_scale_and_causal(const Case& c, AttentionOptions& o, ref::SoftmaxMasks& m) {
  o.scale = c.scale;
  o.causal = c.causal;
  o.causal_at_key_length = c.causal_at_key_length;
  m.scale = c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.D));
  m.causal = c.causal;
  if (c.causal_at_key_length) m.causal_end = c.key_length;
}

// A key_length input of value `n` (-1: none) on the op's options and the reference's masks.
inline void add_key_length(Graph& g, std::map<std::string, HostTensor>& inputs, AttentionOptions& o,
                           ref::SoftmaxMasks& m, int32_t n) {
  if (n < 0) return;
  o.key_length = g.input("key_length", {1}, DType::i32);
  inputs.emplace("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{n}));
  m.key_length = n;
}

}  // namespace vkformer::testing
