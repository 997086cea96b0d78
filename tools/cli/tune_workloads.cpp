#include "tune_workloads.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "data.hpp"
#include "internal.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::cli {

namespace {

using kernels::TuneOp;
using kernels::TuneShape;

// Prompt tokens per batched pass of the language models (src/models/llm/language_model.cpp).
constexpr int64_t kPromptChunk = 64;
// Keys the prompt chunk's attention reads in a model's shapes: a typical position in a prompt.
constexpr int64_t kModelKeys = 512;

TuneShape linear(int64_t m, int64_t n, int64_t k, DType dt = DType::f32) {
  TuneShape s;
  s.op = TuneOp::linear;
  s.dtype = dt;
  s.m = m, s.n = n, s.k = k;
  return s;
}

TuneShape matmul(int64_t n, DType dt) {
  TuneShape s = linear(n, n, n, dt);
  s.op = TuneOp::matmul;
  return s;
}

TuneShape quantized(int64_t m, int64_t n, int64_t k, DType w) {
  TuneShape s = linear(m, n, k);
  s.op = TuneOp::linear_quantized;
  s.weight = w;
  return s;
}

TuneShape attention(int64_t heads, int64_t kv_heads, int64_t sq, int64_t sk, int64_t d,
                    DType dt = DType::f32) {
  TuneShape s;
  s.op = TuneOp::attention;
  s.dtype = dt;
  s.heads = heads, s.kv_heads = kv_heads, s.m = sq, s.n = sk, s.head_dim = d;
  return s;
}

TuneShape causal(TuneShape s) {
  s.causal = true;
  return s;
}

TuneShape rows(TuneOp op, int64_t m, int64_t n, DType dt = DType::f32) {
  TuneShape s;
  s.op = op;
  s.dtype = dt;
  s.m = m, s.n = n;
  return s;
}

void add_unique(std::vector<TuneShape>& list, const TuneShape& s) {
  for (const TuneShape& t : list)
    if (t.text() == s.text()) return;
  list.push_back(s);
}

}  // namespace

std::vector<TuneShape> standard_tune_shapes(bool cpu_device) {
  std::vector<TuneShape> v;
  // bench --quick: matmul squares, BERT-base's qkv over 1024 tokens, the encoder layer's
  // projections (batch 1 x 128 tokens), the d512 decoder step's projections (one token),
  // SmolLM2's Q4_1 up projection, attention, softmax and layer norm.
  for (TuneShape s : {matmul(256, DType::f32), matmul(256, DType::f16), matmul(512, DType::f16),
                      linear(1024, 2304, 768), linear(128, 2304, 768), linear(128, 768, 768),
                      linear(128, 3072, 768), linear(128, 768, 3072), linear(1, 1536, 512),
                      linear(1, 512, 512), linear(1, 2048, 512), linear(1, 512, 2048),
                      quantized(1, 1536, 576, DType::q4_1), quantized(128, 1536, 576, DType::q4_1),
                      attention(8, 8, 128, 128, 64), attention(12, 12, 128, 128, 64),
                      rows(TuneOp::softmax, 96 * 128, 128), rows(TuneOp::layer_norm, 1024, 512),
                      rows(TuneOp::layer_norm, 128, 768), rows(TuneOp::rms_norm, 1024, 512)})
    v.push_back(s);
  if (cpu_device) return v;
  // GPUs: the sizes of the GPU measurement issue (matmul 4096³, transformer projections over
  // 4096 tokens, Q4_K prompt GEMM and decode, attention at sequence 2048, large rows).
  for (TuneShape s : {matmul(4096, DType::f32), matmul(4096, DType::f16),
                      linear(4096, 3072, 768), linear(4096, 3072, 768, DType::f16),
                      linear(1, 4096, 4096), linear(1, 4096, 4096, DType::f16),
                      quantized(512, 14336, 4096, DType::q4_k), quantized(1, 14336, 4096, DType::q4_k),
                      quantized(512, 14336, 4096, DType::q4_0),
                      attention(8, 8, 2048, 2048, 64, DType::f16),
                      causal(attention(8, 8, 2048, 2048, 64, DType::f16)),
                      attention(16, 16, 2048, 2048, 128, DType::f16),
                      // decoding steps over long caches (bench's attention/decode): split-K
                      attention(32, 8, 1, 4096, 64, DType::f16),
                      attention(32, 8, 1, 8192, 128, DType::f16),
                      rows(TuneOp::softmax, 12 * 2048, 2048), rows(TuneOp::layer_norm, 4096, 4096),
                      rows(TuneOp::rms_norm, 4096, 4096)})
    v.push_back(s);
  return v;
}

std::vector<TuneShape> model_tune_shapes(const std::string& gguf_path) {
  GgufFile f(gguf_path);
  const std::string arch(f.get_string("general.architecture"));
  const int64_t d = static_cast<int64_t>(f.get_uint(arch + ".embedding_length"));
  const int64_t heads = static_cast<int64_t>(f.get_uint(arch + ".attention.head_count"));
  const int64_t kv_heads =
      static_cast<int64_t>(f.get_uint_or(arch + ".attention.head_count_kv", uint64_t(heads)));
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads || d % heads)
    throw Error(ErrorCode::format, f.label() + ": head counts " + std::to_string(heads) + " / " +
                                       std::to_string(kv_heads) + " do not fit width " +
                                       std::to_string(d));
  const int64_t head_dim =
      static_cast<int64_t>(f.get_uint_or(arch + ".attention.key_length", uint64_t(d / heads)));

  std::vector<TuneShape> v;
  auto add_linear = [&](const GgufTensorInfo& t, bool prompt) {
    // Weights of matmuls only: 2-D, and no norm (a writer may store one as [1, d]).
    if (t.n_dims != 2 || t.ne[1] < 2 || t.name.find("norm") != std::string::npos) return;
    DType w;
    try {
      w = dtype_from_ggml(t.type);
    } catch (const Error&) {
      return;  // a type vkformer does not run on the device: nothing to tune for it
    }
    const int64_t n = static_cast<int64_t>(t.ne[1]), k = static_cast<int64_t>(t.ne[0]);
    for (int64_t m : {int64_t{1}, kPromptChunk}) {
      if (m > 1 && !prompt) continue;
      add_unique(v, w == DType::f32 ? linear(m, n, k) : quantized(m, n, k, w));
    }
  };
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name.starts_with("blk.0.")) add_linear(t, true);
  // The output projection (only the last prompt token needs it): output.weight, or the token
  // embedding where they are tied.
  if (const GgufTensorInfo* out = f.find_tensor("output.weight"))
    add_linear(*out, false);
  else if (const GgufTensorInfo* emb = f.find_tensor("token_embd.weight"))
    add_linear(*emb, false);
  // The prompt chunk's attention with f32 and f16 activations (LanguageModelOptions: f16 takes
  // flash attention where the device has cooperative matrices), and a decoding step's (split-K
  // decoding on GPUs) at the same position.
  add_unique(v, attention(heads, kv_heads, kPromptChunk, kModelKeys, head_dim));
  add_unique(v, attention(heads, kv_heads, kPromptChunk, kModelKeys, head_dim, DType::f16));
  add_unique(v, attention(heads, kv_heads, 1, kModelKeys, head_dim));
  add_unique(v, rows(TuneOp::rms_norm, kPromptChunk, d));
  if (v.size() <= 2)
    throw Error(ErrorCode::format, f.label() + ": no 2-D weights in blk.0 to tune for");
  return v;
}

std::unique_ptr<Executor> prepare_tune_shape(Device& device, const TuneShape& s) {
  using bench::random_device;
  Graph g;
  Tensor y;
  const DType dt = s.dtype;
  switch (s.op) {
    case TuneOp::linear:
    case TuneOp::matmul: {
      const bool lin = s.op == TuneOp::linear;
      const Shape as{s.m, s.k}, bs = lin ? Shape{s.n, s.k} : Shape{s.k, s.n};
      bench::require_allocatable(device, as, dt, "A");
      bench::require_allocatable(device, bs, dt, "B");
      Tensor a = g.external("a", random_device(device, as, dt, 1));
      Tensor b = g.external("b", random_device(device, bs, dt, 2, -0.5f, 0.5f));
      y = lin ? g.linear(a, b, g.external("bias", random_device(device, {s.n}, dt, 3)))
              : g.matmul(a, b);
      break;
    }
    case TuneOp::linear_quantized: {
      const Shape xs{s.m, s.k}, ws{s.n, s.k};
      bench::require_allocatable(device, ws, s.weight, "the weight");
      Tensor x = g.external("x", random_device(device, xs, dt, 41));
      const bool plain = s.weight == DType::f32 || s.weight == DType::f16;
      Tensor w = g.external("w", plain ? random_device(device, ws, s.weight, 42, -0.1f, 0.1f)
                                       : device.upload(bench::random_quantized(ws, s.weight, 42)));
      y = g.linear(x, w);
      break;
    }
    case TuneOp::attention: {
      const Shape qs{s.batch, s.heads, s.m, s.head_dim}, ks{s.batch, s.kv_heads, s.n, s.head_dim};
      bench::require_bindable(device, ks, dt, "k");
      Tensor q = g.external("q", random_device(device, qs, dt, 31));
      Tensor k = g.external("k", random_device(device, ks, dt, 32));
      Tensor v = g.external("v", random_device(device, ks, dt, 33));
      AttentionOptions o;
      o.causal = s.causal;
      o.path = AttentionOptions::Path::fused;  // the tunables are the fused kernel's
      y = g.attention(q, k, v, o);
      break;
    }
    case TuneOp::softmax: {
      bench::require_bindable(device, {s.m, s.n}, dt, "x");
      Tensor x = g.external("x", random_device(device, {s.m, s.n}, dt, 11, -4.0f, 4.0f));
      SoftmaxOptions o;
      o.scale = 0.125f;
      y = g.softmax(x, o);
      break;
    }
    case TuneOp::layer_norm:
    case TuneOp::rms_norm: {
      bench::require_bindable(device, {s.m, s.n}, dt, "x");
      Tensor x = g.external("x", random_device(device, {s.m, s.n}, dt, 21, -3.0f, 3.0f));
      Tensor w = g.external("w", random_device(device, {s.n}, dt, 22, 0.5f, 1.5f));
      y = s.op == TuneOp::rms_norm
              ? g.rms_norm(x, w)
              : g.layer_norm(x, w, g.external("b", random_device(device, {s.n}, dt, 23, -0.1f, 0.1f)));
      break;
    }
  }
  return std::move(bench::compile(device, g, y).executor);
}

}  // namespace vkformer::cli
