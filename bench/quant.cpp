// Quantized weights (matmul_q): linear layers of SmolLM2-135M with ggml-quantized weights as the
// language model runs them, f32 activations. Decoding is M = 1 (a mat-vec, bound by reading the
// weight once: reported against memory bandwidth), prompt processing M = 128 and 512 (tiled,
// against the FMA rate). The f32 weights at the same shapes are in the matmul family
// (matmul/smollm2.*), for the comparison bench/RESULTS.md makes.
#include <cstring>
#include <random>

#include "data.hpp"
#include "internal.hpp"
#include "vkformer/half.hpp"

namespace vkformer::bench {

// Random blocks with sane scales: random quantized values, then every block's fp16 scales set to
// small random numbers (d, and q4_1's m or q4_k's dmin; q6_k's d sits at the end of its
// super-block), so the weights look like a model's (|w| up to ~0.1).
HostTensor random_quantized(const Shape& shape, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t bytes = dtype_bytes(dt, shape.numel());
  std::vector<std::byte> raw(bytes);
  for (auto& b : raw) b = static_cast<std::byte>(rng() & 0xff);
  std::uniform_real_distribution<float> scale(0.001f, 0.006f), offset(-0.05f, 0.0f),
      k_scale(0.00005f, 0.0003f);
  auto put = [&](uint64_t at, float v) {
    const uint16_t h = float_to_half(v);
    std::memcpy(raw.data() + at, &h, 2);
  };
  for (uint64_t at = 0; at < bytes; at += dtype_block_bytes(dt)) {
    if (dt == DType::q4_k) {
      put(at, k_scale(rng));
      put(at + 2, k_scale(rng));
    } else if (dt == DType::q6_k) {
      put(at + 208, k_scale(rng));
    } else {
      put(at, scale(rng));
      if (dt == DType::q4_1) put(at + 2, offset(rng));
    }
  }
  return HostTensor::from_bytes(shape, dt, raw);
}

namespace {

Benchmark quantized_linear(const std::string& variant, int64_t m, int64_t n, int64_t k, DType wt,
                           bool quick = false) {
  Benchmark b;
  b.name = "matmul_q";
  b.variant = variant;
  b.shape = {{"m", m}, {"n", n}, {"k", k}};
  b.params = {{"b_layout", "[n,k] (nn.Linear weight)"}, {"activations", "f32"}, {"bias", "false"}};
  b.dtype = wt;
  b.flops = 2.0 * m * n * k;
  b.bytes = static_cast<double>(dtype_bytes(wt, n * k)) + 4.0 * (m * k + m * n);
  b.bound = m == 1 ? Bound::memory : Bound::compute;
  b.quick = quick;
  const Shape xs{m, k}, ws{n, k};
  b.check = [=](Device& d) {
    require_allocatable(d, xs, DType::f32, "x");
    require_allocatable(d, ws, wt, "the weight");
  };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor x = g.external("x", random_device(d, xs, DType::f32, 41));
    Tensor w = g.external("w", d.upload(random_quantized(ws, wt, 42)));
    return compile(d, g, g.linear(x, w));
  };
  return b;
}

// A decoding step's linear with the fusions of Graph::LinearOptions (pre-norm, gated gate/up
// pair, residual), as the language model runs them: `n` output columns (the weight has 2n rows
// when gated).
Benchmark fused_linear(const std::string& variant, int64_t n, int64_t k, DType wt, bool norm,
                       bool gated, bool residual) {
  Benchmark b = quantized_linear(variant, 1, gated ? 2 * n : n, k, wt);
  b.shape = {{"m", 1}, {"n", n}, {"k", k}};
  b.params.push_back({"fused", std::string(norm ? "norm " : "") + (gated ? "gated " : "") +
                                   (residual ? "residual" : "")});
  b.bytes += (norm ? 4.0 * k : 0.0) + (residual ? 4.0 * n : 0.0) - (gated ? 4.0 * n : 0.0);
  const Shape xs{1, k}, ws{gated ? 2 * n : n, k};
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor x = g.external("x", random_device(d, xs, DType::f32, 41));
    Tensor w = g.external("w", d.upload(random_quantized(ws, wt, 42)));
    LinearOptions o;
    if (norm) o.norm = g.external("gamma", random_device(d, {k}, DType::f32, 43));
    if (gated) {
      o.gated = true;
      o.activation = Activation::silu;
    }
    if (residual) o.residual = g.external("r", random_device(d, {1, n}, DType::f32, 44));
    return compile(d, g, g.linear(x, w, o));
  };
  return b;
}

}  // namespace

std::vector<Benchmark> quant_benchmarks() {
  std::vector<Benchmark> list;
  // SmolLM2-135M: width 576, FFN 1536 (gate/up [1536, 576], down [576, 1536]) in Q4_1, the
  // output projection (the Q8_0 token embedding [49152, 576]).
  list.push_back(quantized_linear("smollm2.ffn_up", 1, 1536, 576, DType::q4_1, true));
  list.push_back(quantized_linear("smollm2.ffn_down", 1, 576, 1536, DType::q4_1));
  list.push_back(quantized_linear("smollm2.attn_q", 1, 576, 576, DType::q4_1));
  list.push_back(quantized_linear("smollm2.output", 1, 49152, 576, DType::q8_0));
  list.push_back(quantized_linear("smollm2.ffn_up", 1, 1536, 576, DType::q8_0));
  list.push_back(quantized_linear("smollm2.ffn_up", 1, 1536, 576, DType::q4_0));
  // Gemma 3 270M's decode (Q4_K_M): the 640-wide rows take q5_0 (K is no multiple of 256), its
  // gate/up pair [2 x 2048, 640]; the same shape in q8_0 beside it, per weight (issue 35).
  list.push_back(quantized_linear("gemma3.ffn_gate_up", 1, 4096, 640, DType::q5_0));
  list.push_back(quantized_linear("gemma3.ffn_gate_up", 1, 4096, 640, DType::q8_0));
  for (int64_t tokens : {128, 512}) {
    list.push_back(quantized_linear("smollm2.ffn_up", tokens, 1536, 576, DType::q4_1, tokens == 128));
    list.push_back(quantized_linear("smollm2.ffn_down", tokens, 576, 1536, DType::q4_1));
    list.push_back(quantized_linear("smollm2.ffn_up", tokens, 1536, 576, DType::q8_0));
  }
  // Llama-3.2-1B's feed-forward as Q4_K_M files store it (up Q4_K, down Q6_K, whose dims are
  // whole 256-element super-blocks), beside Q4_1 at the same shape.
  for (int64_t tokens : {1, 128}) {
    list.push_back(quantized_linear("llama1b.ffn_up", tokens, 8192, 2048, DType::q4_k));
    list.push_back(quantized_linear("llama1b.ffn_down", tokens, 2048, 8192, DType::q6_k));
    list.push_back(quantized_linear("llama1b.ffn_up", tokens, 8192, 2048, DType::q4_1));
  }
  list.push_back(quantized_linear("smollm2.ffn_up", 1, 1536, 576, DType::q5_0));
  // A speculative verification pass's rows (the last token and 1, 2, 4 or 8 proposals, issue
  // 38) and serve's batched decoding steps: each weight read once should serve every row.
  for (int64_t rows : {2, 3, 5, 9}) {
    list.push_back(quantized_linear("smollm2.ffn_up", rows, 1536, 576, DType::q4_1));
    list.push_back(quantized_linear("smollm2.ffn_down", rows, 576, 1536, DType::q4_1));
    list.push_back(quantized_linear("smollm2.output", rows, 49152, 576, DType::q8_0));
  }
  // A SmolLM2 decoding step's four linears per block and its head, fused as the model runs them.
  list.push_back(fused_linear("smollm2.attn_qkv+norm", 960, 576, DType::q4_1, true, false, false));
  list.push_back(fused_linear("smollm2.attn_output+residual", 576, 576, DType::q4_1, false, false, true));
  list.push_back(fused_linear("smollm2.ffn_gate_up+norm+swiglu", 1536, 576, DType::q4_1, true, true, false));
  list.push_back(fused_linear("smollm2.ffn_down+residual", 576, 1536, DType::q4_1, false, false, true));
  list.push_back(fused_linear("smollm2.output+norm", 49152, 576, DType::q8_0, true, false, false));
  // The GPU issue's quantized prompt GEMM: 512 tokens through a [4096, 14336] weight (ggml's
  // MUL_MAT 4096 x 512 x 14336, the f16 matmul/ffn-large's work).
  for (DType wt : {DType::q4_0, DType::q4_k})
    list.push_back(quantized_linear("ffn-large", 512, 4096, 14336, wt));
  // The same shapes with f32 weights, through the f32 kernels.
  for (int64_t tokens : {1, 128, 512}) {
    list.push_back(linear_matmul("smollm2.ffn_up", tokens, 1536, 576, DType::f32));
    list.push_back(linear_matmul("smollm2.ffn_down", tokens, 576, 1536, DType::f32));
  }
  list.push_back(linear_matmul("smollm2.output", 1, 49152, 576, DType::f32));
  return list;
}

}  // namespace vkformer::bench
