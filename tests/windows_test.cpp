// Ops over tensors larger than one binding may span (maxStorageBufferRange): matmul, embedding,
// attention and KV-cache updates bind windows of their large operands, one dispatch each
// (src/ops/windows.hpp).
//
// Most cases run on a device whose binding limit is lowered to a few KiB
// (VKFORMER_MAX_BINDING_BYTES), so every way of splitting runs on small tensors, on the CPU
// configuration of the kernels and on the GPU one (VKFORMER_TUNING_AS_GPU: the shared-memory,
// split-K and GEMV matmul kernels). The RealLimit cases cross the device's own limit, whatever it
// reports (128 MiB on lavapipe, 4 GiB on NVIDIA), with an embedding table and matmul operands
// just larger than it; they skip only where the device or the machine cannot hold such a tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device_impl.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

// Small enough that every case below is split, large enough for their smallest aligned windows.
constexpr const char* kLimit = "8192";

Device open_windowed_device(bool as_gpu) {
  std::vector<std::pair<const char*, const char*>> env = {{"VKFORMER_MAX_BINDING_BYTES", kLimit}};
  if (as_gpu) env.push_back({"VKFORMER_TUNING_AS_GPU", "1"});
  return open_test_device_with_env(env);
}

// Runs `check` on a windowed device of each configuration (CPU, then GPU tuning) with each
// attention path (fused, unfused), each named in the failures' trace.
void for_each_windowed_attention(const std::function<void(Device&, AttentionOptions::Path)>& check) {
  for (bool as_gpu : {false, true})
    for (auto path : {AttentionOptions::Path::fused, AttentionOptions::Path::unfused}) {
      SCOPED_TRACE(std::string(as_gpu ? "gpu" : "cpu") + " tuning, " +
                   (path == AttentionOptions::Path::fused ? "fused" : "unfused"));
      Device dev = open_windowed_device(as_gpu);
      check(dev, path);
    }
}

// The windowed attention cases' options: causal, scale 0.25, on `path`.
AttentionOptions causal_quarter_scale(AttentionOptions::Path path) {
  AttentionOptions o;
  o.scale = 0.25f;
  o.causal = true;
  o.path = path;
  return o;
}

// fp32 attention, eight times the default absolute tolerance (sums over windows in another order).
Tolerance windowed_attention_tolerance() {
  Tolerance tol = default_tolerance(DType::f32);
  tol.atol *= 8;
  return tol;
}

struct MatmulCase {
  const char* name;
  Shape a, b;
  bool transpose_b = false;
  bool bias = false;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

// out = act(a·b + bias) on `device`, against the double-precision reference.
::testing::AssertionResult matmul_matches(Device& device, const MatmulCase& c) {
  const auto av = random_values(c.a.numel(), 11), bv = random_values(c.b.numel(), 12);
  const int64_t k = c.a[-1], n = c.transpose_b ? c.b[-2] : c.b[-1];
  const auto biasv = random_values(n, 13);
  Graph g;
  Tensor a = g.input("a", c.a, c.dtype);
  Tensor b = g.constant("b", make_tensor(c.b, bv, c.dtype));
  MatmulOptions o;
  o.transpose_b = c.transpose_b;
  o.activation = c.act;
  if (c.bias) o.bias = g.constant("bias", make_tensor({n}, biasv, c.dtype));
  g.output("y", g.matmul(a, b, o));
  Executor ex(device, g);
  auto out = ex.run({{"a", make_tensor(c.a, av, c.dtype)}});

  // The reference: a's leading dims are its batch; b has one matrix or as many as a.
  const int64_t m = c.a[-2];
  const int64_t batch = c.a.numel() / (m * k);
  const int64_t b_batch = c.b.numel() / (k * n);
  const auto bias_stored = stored(biasv, c.dtype);
  auto want = ref::matmul(stored(av, c.dtype), stored(bv, c.dtype), batch, b_batch, m, n, k,
                          c.transpose_b, c.bias ? &bias_stored : nullptr, 1.0);
  for (double& x : want)
    x = c.act == Activation::gelu ? ref::gelu(x) : c.act == Activation::relu ? ref::relu(x) : x;
  // Sums of k products of values in [-1, 1): the error grows with k.
  Tolerance tol = default_tolerance(c.dtype);
  tol.atol *= std::sqrt(static_cast<double>(k));
  return all_close(out["y"], want, tol);
}

// Every way a matmul is split: rows of a (and out), rows of a transposed b (columns of out,
// with and without a bias), both at once, batches of matrices, M <= 8 (the GEMV kernel on GPUs),
// f16 rows whose bytes are not a multiple of the window alignment.
const MatmulCase kSplitMatmuls[] = {
    {"rows_of_a", {300, 24}, {24, 5}},
    {"rows_of_a_batch_folded", {3, 37, 24}, {24, 9}, false, true, Activation::relu},
    {"rows_of_weight", {6, 24}, {400, 24}, true, true, Activation::gelu},
    {"rows_of_weight_no_bias", {2, 64}, {300, 64}, true},
    {"rows_of_a_and_weight", {3, 37, 24}, {300, 24}, true, true, Activation::gelu},
    {"batches", {5, 20, 30}, {5, 30, 17}},
    {"rows_of_a_4d", {4, 2, 33, 20}, {20, 7}},
    {"f16_odd_rows", {70, 37}, {91, 37}, true, true, Activation::none, DType::f16},
    {"f16_batches", {6, 21, 13}, {6, 13, 19}, false, false, Activation::none, DType::f16},
};

class WindowedMatmulTest : public DeviceTestWithParam<MatmulCase> {};

TEST_P(WindowedMatmulTest, MatchesReferenceOnCpuKernels) {
  Device dev = open_windowed_device(false);
  EXPECT_TRUE(matmul_matches(dev, GetParam()));
}

TEST_P(WindowedMatmulTest, MatchesReferenceOnGpuKernels) {
  Device dev = open_windowed_device(true);
  EXPECT_TRUE(matmul_matches(dev, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Splits, WindowedMatmulTest, ::testing::ValuesIn(kSplitMatmuls),
                         [](const auto& info) { return std::string(info.param.name); });

// The windows are real: compiled on the lowered limit, the same graph has more dispatches.
TEST_F(DeviceTest, WindowedMatmulDispatchesOncePerWindow) {
  Device dev = open_windowed_device(false);
  Graph g;
  Tensor x = g.input("x", {4, 24});
  Tensor w = g.constant("w", make_tensor({400, 24}, random_values(400 * 24, 1), DType::f32));
  g.output("y", g.linear(x, w));
  Executor whole(device(), g), windowed(dev, g);
  // 400 rows of 96 bytes in windows of at most 8192 bytes: at most 85 rows per window (fewer
  // where the window alignment needs it), 5 windows; x and out (6400 bytes) fit.
  EXPECT_EQ(windowed.stats().dispatches, whole.stats().dispatches * 5);
}

TEST_F(DeviceTest, WindowedMatmulRefusesWhatWindowsCannotSplit) {
  Device dev = open_windowed_device(false);
  // Compiling y = product(input of `x_shape`, constant of `w_shape`) on the windowed device fails
  // with `needle`.
  auto refused = [&](Shape x_shape, Shape w_shape, bool linear, const std::string& needle) {
    SCOPED_TRACE(needle);
    Graph g;
    const Tensor x = g.input("x", x_shape);
    const Tensor w = g.constant("w", make_tensor(w_shape, random_values(static_cast<size_t>(w_shape.numel()), 2),
                                                 DType::f32));
    g.output("y", linear ? g.linear(x, w) : g.matmul(x, w));
    EXPECT_TRUE(fails_with([&] { Executor ex(dev, g); }, ErrorCode::unsupported, needle));
  };
  // b [K, N] larger than a binding: its columns are not contiguous.
  refused({2, 40}, {40, 100}, false, "b is split into windows only when transposed");
  // One row of a (the linear's weight) larger than a binding.
  refused({2, 4096}, {1, 4096}, true, "one binding may span");
}

// Attention over caches beyond one binding: windows of (b, h) slices of q, k, v and out, with
// a broadcast mask, key padding and causal masking read from bh_base; the fused kernels of both
// configurations (rows on CPU devices, tiles on GPUs) and the unfused chain.
TEST_F(DeviceTest, WindowedAttentionMatchesReference) {
  // A (b, h) slice of k takes 4608 bytes; the unfused path's scores (4608 bytes) fit one binding:
  // softmax does not split into windows.
  const int64_t B = 2, H = 4, Sq = 2, Sk = 72, D = 16;
  const auto qv = random_values(B * H * Sq * D, 31), kv = random_values(B * H * Sk * D, 32),
             vv = random_values(B * H * Sk * D, 33), maskv = random_values(Sq * Sk, 34);
  std::vector<int32_t> padding(B * Sk, 0);
  for (int64_t j = 60; j < Sk; ++j) padding[Sk + j] = 1;  // batch 1 ignores its last 12 keys
  ref::SoftmaxMasks m;
  m.scale = 0.25;
  m.causal = true;
  const auto mask_full = broadcast_to(stored(maskv, DType::f32), {Sq, Sk}, {B, H, Sq, Sk});
  m.mask = &mask_full;
  m.key_padding = &padding;
  const auto want = ref::attention(stored(qv, DType::f32), stored(kv, DType::f32),
                                   stored(vv, DType::f32), B, H, Sq, Sk, D, D, m);
  for_each_windowed_attention([&](Device& dev, AttentionOptions::Path path) {
    Graph g;
    AttentionOptions o = causal_quarter_scale(path);
    o.mask = g.constant("mask", make_tensor({Sq, Sk}, maskv, DType::f32));
    o.key_padding_mask = g.input("padding", {B, Sk}, DType::i32);
    g.output("y", g.attention(g.input("q", {B, H, Sq, D}), g.input("k", {B, H, Sk, D}),
                              g.input("v", {B, H, Sk, D}), o));
    Executor ex(dev, g);
    auto out = ex.run({{"q", make_tensor({B, H, Sq, D}, qv, DType::f32)},
                       {"k", make_tensor({B, H, Sk, D}, kv, DType::f32)},
                       {"v", make_tensor({B, H, Sk, D}, vv, DType::f32)},
                       {"padding", HostTensor::from_i32({B, Sk}, padding)}});
    EXPECT_TRUE(all_close(out["y"], want, windowed_attention_tolerance()));
  });
}

// Grouped-query attention over windows: each window holds whole KV heads of k and v with their
// group of query heads of q and out (here a (b, KV head) slice of k takes 4608 bytes, so every
// window has one), on both configurations and both paths.
TEST_F(DeviceTest, WindowedGroupedQueryAttentionMatchesReference) {
  const int64_t B = 2, H = 6, Hkv = 2, Sq = 2, Sk = 72, D = 16;
  const auto qv = random_values(B * H * Sq * D, 41), kv = random_values(B * Hkv * Sk * D, 42),
             vv = random_values(B * Hkv * Sk * D, 43);
  // The reference's K and V: each query head's KV head, repeated.
  const auto k_rep = ref::repeat_kv(stored(kv, DType::f32), B, H, Hkv, Sk, D);
  const auto v_rep = ref::repeat_kv(stored(vv, DType::f32), B, H, Hkv, Sk, D);
  ref::SoftmaxMasks m;
  m.scale = 0.25;
  m.causal = true;
  const auto want = ref::attention(stored(qv, DType::f32), k_rep, v_rep, B, H, Sq, Sk, D, D, m);
  for_each_windowed_attention([&](Device& dev, AttentionOptions::Path path) {
    Graph g;
    AttentionOptions o = causal_quarter_scale(path);
    g.output("y", g.attention(g.input("q", {B, H, Sq, D}), g.input("k", {B, Hkv, Sk, D}),
                              g.input("v", {B, Hkv, Sk, D}), o));
    Executor ex(dev, g);
    auto out = ex.run({{"q", make_tensor({B, H, Sq, D}, qv, DType::f32)},
                       {"k", make_tensor({B, Hkv, Sk, D}, kv, DType::f32)},
                       {"v", make_tensor({B, Hkv, Sk, D}, vv, DType::f32)}});
    EXPECT_TRUE(all_close(out["y"], want, windowed_attention_tolerance()));
  });
}

// A KV cache beyond one binding is updated in windows of (b, h) slices: rows from a [B, H, n, D]
// tensor at a run-time position, twice, then the whole cache read back.
TEST_F(DeviceTest, WindowedCacheUpdateWritesEverySlice) {
  Device dev = open_windowed_device(false);
  const int64_t B = 2, H = 3, T = 50, n = 2, D = 16;  // a slice: 3200 bytes, the cache 38400
  DeviceTensor cache = dev.allocate({B, H, T, D}, DType::f32);
  Graph g;
  Tensor c = g.external("cache", cache);
  Tensor rows = g.input("rows", {B, H, n, D});
  // The write into the cache is kept although nothing reads its result.
  g.update_cache(c, rows, g.input("position", {1}, DType::i32));
  g.output("copy", g.scale(rows, 1.0f));
  Executor ex(dev, g);
  std::vector<double> want(B * H * T * D, 0.0);
  for (int32_t position : {7, 48}) {
    const auto rv = random_values(B * H * n * D, 40 + position);
    ex.run({{"rows", make_tensor({B, H, n, D}, rv, DType::f32)},
            {"position", HostTensor::from_i32({1}, std::vector<int32_t>{position})}});
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d)
          want[(bh * T + position + i) * D + d] = rv[(bh * n + i) * D + d];
  }
  EXPECT_TRUE(all_close(dev.download(cache), want, {0.0, 0.0}));
}

// Row and elementwise ops beyond one binding: windows of rows (layer norm, the fused residual
// add + layer norm, add with a same-shape or one-row b) and of elements (gelu, cast), on both
// kernel configurations.
TEST_F(DeviceTest, WindowedRowAndElementwiseOpsMatchReference) {
  const int64_t rows = 150, d = 40;  // 24000 bytes in f32, rows of 160 bytes
  const auto xv = random_values(rows * d, 51), bv = random_values(rows * d, 52),
             gv = random_values(d, 53, 0.5f, 1.5f), betav = random_values(d, 54),
             biasv = random_values(d, 55);
  const auto x = stored(xv, DType::f32), b = stored(bv, DType::f32);
  std::vector<double> sum(x.size()), biased(x.size()), gelu(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    sum[i] = x[i] + b[i];
    biased[i] = x[i] + stored(biasv, DType::f32)[i % d];
    gelu[i] = ref::gelu(x[i]);
  }
  const auto gamma = stored(gv, DType::f32), beta = stored(betav, DType::f32);
  const auto norm = ref::layer_norm(x, rows, d, gamma, beta, 1e-5);
  const auto sum_norm = ref::layer_norm(sum, rows, d, gamma, beta, 1e-5);
  const auto x16 = stored(xv, DType::f16);
  for (bool as_gpu : {false, true}) {
    SCOPED_TRACE(as_gpu ? "gpu tuning" : "cpu tuning");
    Device dev = open_windowed_device(as_gpu);
    Graph g;
    Tensor xt = g.input("x", {rows, d}), bt = g.input("b", {rows, d});
    Tensor gt = g.constant("gamma", make_tensor({d}, gv, DType::f32));
    Tensor betat = g.constant("beta", make_tensor({d}, betav, DType::f32));
    g.output("norm", g.layer_norm(xt, gt, betat));
    g.output("sum_norm", g.add_layer_norm(xt, bt, gt, betat));
    g.output("sum", g.add(xt, bt));
    g.output("biased", g.add(xt, g.constant("bias", make_tensor({d}, biasv, DType::f32))));
    g.output("gelu", g.gelu(xt));
    g.output("half", g.cast(xt, DType::f16));
    Executor ex(dev, g);
    auto out = ex.run({{"x", make_tensor({rows, d}, xv, DType::f32)},
                       {"b", make_tensor({rows, d}, bv, DType::f32)}});
    const Tolerance tol = default_tolerance(DType::f32);
    EXPECT_TRUE(all_close(out["norm"], norm, tol));
    EXPECT_TRUE(all_close(out["sum_norm"], sum_norm, tol));
    EXPECT_TRUE(all_close(out["sum"], sum, tol));
    EXPECT_TRUE(all_close(out["biased"], biased, tol));
    EXPECT_TRUE(all_close(out["gelu"], gelu, tol));
    EXPECT_TRUE(all_close(out["half"], x16, {0.0, 0.0}));
  }
}

::testing::AssertionResult embedding_matches(Device& device, const Shape& ids_shape,
                                             int64_t vocab, int64_t d, DType dtype) {
  const auto ids = random_ids(ids_shape.numel(), vocab, 21);
  const auto table = random_values(vocab * d, 22);
  Graph g;
  Tensor i = g.input("ids", ids_shape, DType::i32);
  g.output("y", g.embedding(i, g.constant("table", make_tensor({vocab, d}, table, dtype))));
  Executor ex(device, g);
  auto out = ex.run({{"ids", HostTensor::from_i32(ids_shape, ids)}});
  return all_close(out["y"], ref::embedding(ids, stored(table, dtype), d), {0.0, 0.0});
}

// Windows of table rows (vec4 rows, and f16 rows of 14 bytes: 8 rows per aligned step) times
// windows of tokens.
TEST_F(DeviceTest, WindowedEmbeddingMatchesReference) {
  Device dev = open_windowed_device(false);
  EXPECT_TRUE(embedding_matches(dev, {3, 50}, 1000, 24, DType::f32));
  EXPECT_TRUE(embedding_matches(dev, {700}, 3000, 7, DType::f16));
  EXPECT_TRUE(embedding_matches(dev, {5}, 10, 4, DType::f32));  // fits: one window
}

// Beyond the device's real limit: an embedding table and matmul operands just larger than one
// binding may span, sized from what the device reports (128 MiB on lavapipe, 4 GiB on NVIDIA).

// Host memory free now, from /proc/meminfo (0 where it cannot be read: then not checked).
uint64_t host_bytes_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// Why this device and machine cannot show a tensor of `bytes` that crosses the binding range,
// or empty when they can. The case needs such a tensor on the device (its allocation limit and
// memory) and `host_factor` times its bytes on the host (the values, their upload and the
// double-precision reference); those are the only reasons to skip: on a device with a 4 GiB
// range the case runs with 4 GiB operands.
std::string cannot_cross_the_range(Device& dev, uint64_t bytes, uint64_t host_factor) {
  const DeviceInfo& info = dev.info();
  const uint64_t max_alloc = dev.impl().allocator().max_allocation();
  auto mib = [](uint64_t b) { return std::to_string(b >> 20) + " MiB"; };
  std::string range = "crossing this device's binding range (maxStorageBufferRange " +
                      mib(info.max_storage_buffer_range) + ") takes a tensor of " + mib(bytes);
  if (bytes > max_alloc)
    return range + ", more than one allocation may hold here (" + mib(max_alloc) +
           "): no tensor on this device can span more than one binding";
  if (info.device_local_memory_bytes && 2 * bytes > info.device_local_memory_bytes)
    return range + " and its output: more than this device's memory (" +
           mib(info.device_local_memory_bytes) + ")";
  const uint64_t host = host_bytes_available();
  if (host && host_factor * bytes > host)
    return range + ": its values and reference need about " + mib(host_factor * bytes) +
           " of host memory, " + mib(host) + " is free";
  return {};
}

TEST_F(DeviceTest, RealLimitEmbeddingTableBeyondTheBindingRange) {
  const uint64_t range = device().info().max_storage_buffer_range;
  const int64_t d = 1024;
  const int64_t vocab = static_cast<int64_t>(range / (d * 4)) + 64;  // 64 rows past the range
  const uint64_t bytes = uint64_t(vocab * d * 4);
  // The values, the tensor made of them, their double-precision copy (2x) and the upload: 5x.
  if (std::string why = cannot_cross_the_range(device(), bytes, 5); !why.empty()) GTEST_SKIP() << why;
  ASSERT_GT(bytes, range);
  EXPECT_TRUE(embedding_matches(device(), {2, 33}, vocab, d, DType::f32));
}

TEST_F(DeviceTest, RealLimitMatmulOperandsBeyondTheBindingRange) {
  const uint64_t range = device().info().max_storage_buffer_range;
  const int64_t k = 8192, rows = static_cast<int64_t>(range / (k * 4)) + 64;
  const uint64_t bytes = uint64_t(rows * k * 4);
  // The values, the tensor, their double-precision copy (2x) and the upload: 5x.
  if (std::string why = cannot_cross_the_range(device(), bytes, 5); !why.empty()) GTEST_SKIP() << why;
  ASSERT_GT(bytes, range);
  EXPECT_TRUE(matmul_matches(device(), {"a", {rows, k}, {8, k}, true, true}));
  EXPECT_TRUE(matmul_matches(device(), {"weight", {3, k}, {rows, k}, true, true}));
}

}  // namespace
}  // namespace vkformer::testing
