// The op benchmarks and the list of all benchmarks; the block benchmarks are in blocks.cpp.
#include "benchmarks.hpp"

#include <cmath>
#include <limits>

#include "internal.hpp"
#include "data.hpp"
#include "vkformer/error.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::bench {

std::string Benchmark::shape_text() const {
  std::string s;
  for (auto& [k, v] : shape) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

std::string Benchmark::id() const {
  std::string s = name + "/" + variant + "/" + std::string(dtype_name(dtype)) + "/";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + shape[i].first + "=" + std::to_string(shape[i].second);
  return s;
}

namespace {

// unsupported where `shape` of `dtype` takes more bytes than the device's `limit` (`limit_name`,
// what the device cannot do beyond it: "can bind"): the benchmark is skipped, naming both.
void require_within(Device& device, const Shape& shape, DType dtype, const std::string& what, uint64_t limit,
                    const char* cannot, const char* limit_name) {
  const uint64_t bytes = dtype_bytes(dtype, shape.numel());
  if (bytes > limit)
    throw Error(ErrorCode::unsupported, what + " " + shape.str() + " " + std::string(dtype_name(dtype)) + " takes " +
                                            std::to_string(bytes) + " bytes, more than device '" + device.info().name +
                                            "' " + cannot + " (" + limit_name + " " + std::to_string(limit) + ")");
}

}  // namespace

void require_bindable(Device& device, const Shape& shape, DType dtype, const std::string& what) {
  require_within(device, shape, dtype, what, device.info().max_storage_buffer_range, "can bind",
                 "maxStorageBufferRange");
}

void require_allocatable(Device& device, const Shape& shape, DType dtype, const std::string& what) {
  require_within(device, shape, dtype, what, device.info().max_memory_allocation_size, "allocates at once",
                 "maxMemoryAllocationSize");
}

Prepared compile(Device& device, Graph& graph, Tensor result) {
  graph.output_to(result, graph.external("result", device.allocate(result.shape, result.dtype)));
  CompileOptions options;
  options.timestamps = true;
  Prepared p;
  p.executor = std::make_unique<Executor>(device, graph, options);
  return p;
}

namespace {

double bytes_of(std::initializer_list<Shape> shapes, DType dtype) {
  double n = 0;
  for (const Shape& s : shapes) n += static_cast<double>(s.numel());
  return n * static_cast<double>(dtype_size(dtype));
}

const DType kDtypes[] = {DType::f32, DType::f16};

// out = A·B, or x·Wᵀ + bias as nn.Linear computes it (W is [n, k]).
Benchmark matmul(const std::string& variant, int64_t m, int64_t n, int64_t k, DType dt,
                 bool linear, bool quick = false) {
  Benchmark b;
  b.name = "matmul";
  b.variant = variant;
  b.shape = {{"m", m}, {"n", n}, {"k", k}};
  b.params = {{"b_layout", linear ? "[n,k] (nn.Linear weight)" : "[k,n]"},
              {"bias", linear ? "true" : "false"}};
  b.dtype = dt;
  b.flops = 2.0 * m * n * k;
  b.bytes = bytes_of({{m, k}, {k, n}, {m, n}}, dt);
  b.quick = quick;
  const Shape as{m, k}, bs = linear ? Shape{n, k} : Shape{k, n};
  b.check = [=](Device& d) {
    // Matmul binds windows of operands beyond one binding (src/ops/windows.hpp).
    require_allocatable(d, as, dt, "A");
    require_allocatable(d, bs, dt, "B");
    require_allocatable(d, {m, n}, dt, "the result");
  };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor a = g.external("a", random_device(d, as, dt, 1));
    Tensor w = g.external("b", random_device(d, bs, dt, 2, -0.5f, 0.5f));
    Tensor y = linear ? g.linear(a, w, g.external("bias", random_device(d, {n}, dt, 3)))
                      : g.matmul(a, w);
    return compile(d, g, y);
  };
  return b;
}

// Masked softmax over attention scores [B*H, S, S] with an additive causal mask [S, S].
Benchmark softmax(int64_t bh, int64_t s, DType dt, bool quick = false) {
  Benchmark b;
  b.name = "softmax";
  b.variant = "masked";
  b.shape = {{"rows", bh * s}, {"length", s}};
  b.params = {{"mask", "additive [S,S] (causal -inf), broadcast over B*H"}, {"scale", "0.125"}};
  b.dtype = dt;
  b.flops = 5.0 * bh * s * s;  // scale, mask, max, exp, sum/divide: nominal
  b.bytes = bytes_of({{bh, s, s}, {bh, s, s}, {s, s}}, dt);
  b.bound = Bound::memory;
  b.quick = quick;
  b.check = [=](Device& d) { require_bindable(d, {bh, s, s}, dt, "the scores"); };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor x = g.external("x", random_device(d, {bh, s, s}, dt, 11, -4.0f, 4.0f));
    std::vector<float> m(static_cast<size_t>(s * s), 0.0f);
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = i + 1; j < s; ++j) m[i * s + j] = -std::numeric_limits<float>::infinity();
    Tensor mask = g.external("mask", d.upload(HostTensor::from_f32({s, s}, m, dt)));
    SoftmaxOptions o;
    o.scale = 0.125f;
    o.mask = mask;
    return compile(d, g, g.softmax(x, o));
  };
  return b;
}

Benchmark layer_norm(int64_t rows, int64_t dim, DType dt, bool quick = false) {
  Benchmark b;
  b.name = "layer_norm";
  b.variant = "affine";
  b.shape = {{"rows", rows}, {"d", dim}};
  b.dtype = dt;
  b.flops = 8.0 * rows * dim;  // nominal
  b.bytes = bytes_of({{rows, dim}, {rows, dim}, {dim}, {dim}}, dt);
  b.bound = Bound::memory;
  b.quick = quick;
  b.check = [=](Device& d) { require_bindable(d, {rows, dim}, dt, "x"); };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor x = g.external("x", random_device(d, {rows, dim}, dt, 21, -3.0f, 3.0f));
    Tensor gamma = g.external("gamma", random_device(d, {dim}, dt, 22, 0.5f, 1.5f));
    Tensor beta = g.external("beta", random_device(d, {dim}, dt, 23, -0.1f, 0.1f));
    return compile(d, g, g.layer_norm(x, gamma, beta));
  };
  return b;
}

// x * rsqrt(mean(x^2) + eps) * w over the last dim (Llama's RMSNorm).
Benchmark rms_norm(int64_t rows, int64_t dim, DType dt) {
  Benchmark b;
  b.name = "rms_norm";
  b.variant = "weight";
  b.shape = {{"rows", rows}, {"d", dim}};
  b.dtype = dt;
  b.flops = 4.0 * rows * dim;  // nominal
  b.bytes = bytes_of({{rows, dim}, {rows, dim}, {dim}}, dt);
  b.bound = Bound::memory;
  b.check = [=](Device& d) { require_bindable(d, {rows, dim}, dt, "x"); };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor x = g.external("x", random_device(d, {rows, dim}, dt, 24, -3.0f, 3.0f));
    Tensor w = g.external("w", random_device(d, {dim}, dt, 25, 0.5f, 1.5f));
    return compile(d, g, g.rms_norm(x, w));
  };
  return b;
}

Benchmark attention(int64_t batch, int64_t heads, int64_t seq, int64_t dk, bool causal, bool fused,
                    DType dt, bool quick = false) {
  Benchmark b;
  b.name = "attention";
  b.variant = std::string(fused ? "fused" : "unfused") + (causal ? ".causal" : "");
  b.shape = {{"batch", batch}, {"heads", heads}, {"seq", seq}, {"d_k", dk}};
  b.params = {{"path", fused ? "fused" : "unfused"}, {"causal", causal ? "true" : "false"}};
  b.dtype = dt;
  // QKᵀ and PV: 2 * 2 * S * S * D per head, over the (query, key) pairs that are not masked.
  const double pairs = causal ? seq * (seq + 1) / 2.0 : double(seq) * seq;
  b.flops = 4.0 * batch * heads * pairs * dk;
  const Shape qs{batch, heads, seq, dk};
  b.bytes = bytes_of({qs, qs, qs, qs}, dt);
  b.quick = quick;
  b.check = [=](Device& d) {
    require_bindable(d, qs, dt, "q");
    if (!fused) require_bindable(d, {batch, heads, seq, seq}, dt, "the unfused path's scores");
  };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor q = g.external("q", random_device(d, qs, dt, 31));
    Tensor k = g.external("k", random_device(d, qs, dt, 32));
    Tensor v = g.external("v", random_device(d, qs, dt, 33));
    AttentionOptions o;
    o.causal = causal;
    o.path = fused ? AttentionOptions::Path::fused : AttentionOptions::Path::unfused;
    return compile(d, g, g.attention(q, k, v, o));
  };
  return b;
}

// One decoding step of grouped-query attention: one query per head against a KV cache of
// `context` keys (split-K flash decoding on GPUs). Memory-bound: the cache is read once.
Benchmark attention_decode(int64_t heads, int64_t kv_heads, int64_t context, int64_t dk, DType dt) {
  Benchmark b;
  b.name = "attention";
  b.variant = "decode";
  b.shape = {{"batch", 1}, {"heads", heads}, {"kv_heads", kv_heads}, {"context", context},
             {"d_k", dk}};
  b.params = {{"path", "automatic"}};
  b.dtype = dt;
  b.flops = 4.0 * heads * context * dk;
  const Shape qs{1, heads, 1, dk}, ks{1, kv_heads, context, dk};
  b.bytes = bytes_of({qs, ks, ks, qs}, dt);
  b.bound = Bound::memory;
  b.check = [=](Device& d) { require_bindable(d, ks, dt, "the KV cache"); };
  b.prepare = [=](Device& d) {
    Graph g;
    Tensor q = g.external("q", random_device(d, qs, dt, 34));
    Tensor k = g.external("k", random_device(d, ks, dt, 35));
    Tensor v = g.external("v", random_device(d, ks, dt, 36));
    return compile(d, g, g.attention(q, k, v));
  };
  return b;
}

}  // namespace

Benchmark linear_matmul(const std::string& variant, int64_t m, int64_t n, int64_t k, DType dt, bool quick) {
  return matmul(variant, m, n, k, dt, true, quick);
}

std::vector<Benchmark> all_benchmarks() {
  std::vector<Benchmark> list;
  auto add = [&](Benchmark b) { list.push_back(std::move(b)); };

  // matmul: square sizes, the projections of BERT-base (d 768, ff 3072) and of the d_model-512
  // transformer (ff 2048) over 1024 tokens (batch 8 x 128) as nn.Linear runs them, and one large
  // feed-forward shape.
  for (DType dt : kDtypes)
    for (int64_t n : {256, 512, 1024, 2048, 4096})
      add(matmul("square", n, n, n, dt, false, n == 256 || (n == 512 && dt == DType::f16)));
  for (DType dt : kDtypes) {
    for (int64_t tokens : {1024, 4096}) {
      add(matmul("bert-base.qkv", tokens, 3 * 768, 768, dt, true, tokens == 1024 && dt == DType::f32));
      add(matmul("bert-base.ffn1", tokens, 3072, 768, dt, true));
      add(matmul("bert-base.ffn2", tokens, 768, 3072, dt, true));
    }
    add(matmul("bert-base.out", 1024, 768, 768, dt, true));
    add(matmul("d512.qkv", 1024, 3 * 512, 512, dt, true));
    add(matmul("d512.ffn1", 1024, 2048, 512, dt, true));
    add(matmul("d512.ffn2", 1024, 512, 2048, dt, true));
    add(matmul("ffn-large", 4096, 512, 14336, dt, false));
  }

  // softmax over attention scores with a mask: (B*H, S) for batch 8 x 12 heads and 1 x 12.
  for (DType dt : kDtypes) {
    add(softmax(96, 128, dt, dt == DType::f32));
    add(softmax(96, 512, dt));
    add(softmax(12, 2048, dt));
    add(softmax(12, 4096, dt));
  }

  for (DType dt : kDtypes) {
    add(layer_norm(1024, 512, dt, dt == DType::f32));
    add(layer_norm(4096, 768, dt));
    add(layer_norm(8192, 1024, dt));
    add(layer_norm(4096, 4096, dt));
    add(layer_norm(8192, 4096, dt));  // 64 MiB in f16 too (the GPU issue's row-op size)
  }
  for (DType dt : kDtypes)
    for (int64_t rows : {4096, 8192}) add(rms_norm(rows, 4096, dt));

  // attention: (batch, heads, d_k) of the d512 model, BERT-base at batch 8 and a d_k-128 model.
  struct Config {
    int64_t batch, heads, dk;
  };
  for (DType dt : kDtypes)
    for (Config c : {Config{1, 8, 64}, Config{8, 12, 64}, Config{1, 16, 128}})
      for (int64_t seq : {128, 512, 1024, 2048, 4096})
        for (bool causal : {false, true}) {
          // Causal f16 adds little over the others, but at sequence 2048 (the GPU issue's).
          if (dt == DType::f16 && causal && seq != 2048) continue;
          for (bool fused : {true, false}) {
            bool quick = dt == DType::f32 && c.batch == 1 && c.heads == 8 && seq == 128;
            add(attention(c.batch, c.heads, seq, c.dk, causal, fused, dt, quick && !causal));
          }
        }

  // A decoding step's attention over a long cache: Llama-3.2-1B's heads (32 on 8, d_k 64) and
  // Llama-3-8B's (32 on 8, d_k 128).
  for (DType dt : kDtypes) {
    add(attention_decode(32, 8, 4096, 64, dt));
    add(attention_decode(32, 8, 8192, 128, dt));
  }

  for (auto& b : block_benchmarks()) add(std::move(b));
  for (auto& b : embedding_benchmarks()) add(std::move(b));
  for (auto& b : quant_benchmarks()) add(std::move(b));
  return list;
}

}  // namespace vkformer::bench
