// Executor properties: record once and replay, bit-identical replays, memory reuse, minimal
// barriers, pruning, externals, errors for bad use, and executors on one device in threads.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "latch.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

// x -> 50 dependent elementwise ops, each reading the previous result (and x now and then).
Graph chain_graph(const Shape& shape, int length) {
  Graph g;
  Tensor x = g.input("x", shape);
  Tensor y = x;
  for (int i = 0; i < length; ++i) {
    switch (i % 4) {
      case 0: y = g.scale(y, 0.9f); break;
      case 1: y = g.add(y, x); break;
      case 2: y = g.gelu(y); break;
      case 3: y = g.relu(g.add(y, g.scale(x, -0.5f))); break;
    }
  }
  g.output("y", y);
  return g;
}

std::vector<double> chain_reference(const std::vector<float>& xf, int length) {
  std::vector<double> out(xf.size());
  for (size_t e = 0; e < xf.size(); ++e) {
    // Mirror fp32 rounding of each intermediate: the kernels store fp32 between ops.
    float x = xf[e], y = x;
    for (int i = 0; i < length; ++i) {
      switch (i % 4) {
        case 0: y = y * 0.9f; break;
        case 1: y = y + x; break;
        case 2: y = static_cast<float>(0.5 * y * (1.0 + std::erf(y / std::sqrt(2.0)))); break;
        case 3: y = std::max(y + x * -0.5f, 0.0f); break;
      }
    }
    out[e] = y;
  }
  return out;
}

TEST_F(DeviceTest, ChainOfFiftyDependentOps) {
  const Shape shape{3, 67};
  Graph g = chain_graph(shape, 50);
  Executor ex(device(), g);
  auto xv = random_values(shape.numel(), 21, -2.0f, 2.0f);
  auto out = ex.run({{"x", HostTensor::from_f32(shape, xv)}});
  EXPECT_TRUE(all_close(out["y"], chain_reference(xv, 50), {1e-5, 1e-5}));
  ExecutorStats s = ex.stats();
  EXPECT_GE(s.dispatches, 50u);
  // Every op depends on the one before it, so (almost) every dispatch needs a barrier; the
  // scale(x) that feeds case 3 does not depend on its predecessor and shares a barrier.
  EXPECT_LT(s.barriers, s.dispatches + 2);
}

TEST_F(DeviceTest, HundredReplaysAreBitIdenticalAndRecordedOnce) {
  const Shape shape{2, 5, 33};
  Graph g = chain_graph(shape, 20);
  Executor ex(device(), g);
  auto xv = random_values(shape.numel(), 4);
  ex.set_input("x", HostTensor::from_f32(shape, xv));
  ex.run();
  HostTensor first = ex.output("y");
  for (int i = 0; i < 99; ++i) {
    ex.run();
    HostTensor again = ex.output("y");
    ASSERT_EQ(std::memcmp(first.data(), again.data(), first.nbytes()), 0) << "replay " << i + 2;
  }
  EXPECT_EQ(ex.stats().runs, 100u);
  EXPECT_EQ(ex.stats().recordings, 1u);
}

TEST_F(DeviceTest, ReusedMemoryGivesTheSameResultsInLessSpace) {
  const Shape shape{4, 129};
  Graph g = chain_graph(shape, 30);
  CompileOptions no_reuse;
  no_reuse.reuse_memory = false;
  Executor planned(device(), g), naive(device(), g, no_reuse);
  auto x = HostTensor::from_f32(shape, random_values(shape.numel(), 8));
  auto a = planned.run({{"x", x}})["y"];
  auto b = naive.run({{"x", x}})["y"];
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  EXPECT_LT(planned.stats().activation_bytes * 4, naive.stats().activation_bytes);
  EXPECT_GE(naive.stats().activation_bytes, naive.stats().unplanned_bytes);
}

TEST_F(DeviceTest, IndependentOpsShareOneBarrier) {
  Graph g;
  Tensor x = g.input("x", {1000});
  // Four independent reads of x, then one op reading all four results.
  Tensor a = g.scale(x, 1), b = g.scale(x, 2), c = g.scale(x, 3), d = g.scale(x, 4);
  g.output("y", g.add(g.add(a, b), g.add(c, d)));
  // Without memory reuse only true dependencies need barriers: input copy -> scales; scales ->
  // adds; adds -> last add; last add -> output copy. The four scales share one.
  CompileOptions no_reuse;
  no_reuse.reuse_memory = false;
  Executor ex(device(), g, no_reuse);
  EXPECT_EQ(ex.stats().dispatches, 7u);
  EXPECT_EQ(ex.stats().barriers, 4u);
  // With reuse the second add may write bytes the first add still reads (write-after-read):
  // at most one more barrier for that.
  EXPECT_LE(Executor(device(), g).stats().barriers, 5u);
  auto out = ex.run({{"x", HostTensor::from_f32({1000}, std::vector<float>(1000, 1.0f))}});
  for (float v : out["y"].to_f32()) ASSERT_EQ(v, 10.0f);
}

TEST_F(DeviceTest, UnusedNodesAreNotRun) {
  Graph g;
  Tensor x = g.input("x", {16});
  g.gelu(g.scale(x, 3));  // dead
  g.output("y", g.relu(x));
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 1u);
}

TEST_F(DeviceTest, ExternalTensorsConnectGraphsOnTheDevice) {
  DeviceTensor shared = device().allocate({8}, DType::f32);
  Graph producer;
  Tensor target = producer.external("shared", shared);
  producer.output_to(producer.scale(producer.input("x", {8}), 2.0f), target);
  Graph consumer;
  consumer.output("y", consumer.add(consumer.external("shared", shared), consumer.input("b", {8})));

  Executor p(device(), producer), c(device(), consumer);
  std::vector<float> xs = {1, 2, 3, 4, 5, 6, 7, 8}, bs(8, 0.5f);
  p.run({{"x", HostTensor::from_f32({8}, xs)}});
  auto y = c.run({{"b", HostTensor::from_f32({8}, bs)}})["y"].to_f32();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 2 * xs[i] + 0.5f);
  EXPECT_EQ(device().download(shared).to_f32()[7], 16.0f);
}

TEST_F(DeviceTest, UpdateCacheAppendsRowsAtARunTimePosition) {
  // cache [B=2, H=1, T=5, D=3]; each run writes n=2 rows at the position given as an input.
  DeviceTensor cache = device().allocate({2, 1, 5, 3}, DType::f32);
  Graph g;
  Tensor c = g.external("cache", cache);
  Tensor rows = g.input("rows", {2, 1, 2, 3});
  Tensor pos = g.input("pos", {1}, DType::i32);
  g.output("seen", g.copy(g.update_cache(c, rows, pos)));
  Executor ex(device(), g);

  std::vector<float> expected(30, 0.0f);
  for (int32_t p : {0, 3, 1}) {
    std::vector<float> r(12);
    for (int i = 0; i < 12; ++i) r[i] = static_cast<float>(100 * p + i);
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 2; ++i)
        for (int d = 0; d < 3; ++d) expected[(b * 5 + p + i) * 3 + d] = r[(b * 2 + i) * 3 + d];
    auto out = ex.run({{"rows", HostTensor::from_f32({2, 1, 2, 3}, r)},
                       {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{p})}});
    EXPECT_EQ(out["seen"].to_f32(), expected) << "position " << p;
  }
  EXPECT_EQ(device().download(cache).to_f32(), expected);
  EXPECT_EQ(ex.stats().recordings, 1u);
  // Rows [4, 6) would not fit in 5: refused before anything runs.
  EXPECT_THROW(ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{4})), Error);
  EXPECT_THROW(g.update_cache(rows, rows, pos), Error);  // not an external cache
}

TEST_F(DeviceTest, APositionReshapedFromAnInputIsCheckedWhenSet) {
  DeviceTensor cache = device().allocate({1, 1, 5, 3}, DType::f32);
  Graph g;
  Tensor pos = g.input("pos", {1, 1}, DType::i32);
  g.output("seen", g.copy(g.update_cache(g.external("cache", cache), g.input("rows", {1, 1, 2, 3}),
                                         g.reshape(pos, {1}))));
  Executor ex(device(), g);
  ex.set_input("pos", HostTensor::from_i32({1, 1}, std::vector<int32_t>{3}));  // rows 3 and 4
  EXPECT_THROW(ex.set_input("pos", HostTensor::from_i32({1, 1}, std::vector<int32_t>{4})), Error);
  EXPECT_THROW(ex.set_input("pos", HostTensor::from_i32({1, 1}, std::vector<int32_t>{-1})), Error);
}

TEST_F(DeviceTest, UpdateCacheReadsTheHeadsOfAPackedProjection) {
  // cache [B=2, H=2, T=5, D=3]; the rows are heads split from columns [1, 7) of a packed
  // [B, n=2, C=9] projection, and the cache write reads them there: no split copy.
  const int64_t B = 2, H = 2, T = 5, D = 3, n = 2, C = 9, offset = 1;
  DeviceTensor cache = device().allocate({B, H, T, D}, DType::f32);
  Graph g;
  Tensor c = g.external("cache", cache);
  Tensor packed = g.input("packed", {B, n, C});
  Tensor pos = g.input("pos", {1}, DType::i32);
  Tensor rows = g.split_heads(packed, static_cast<int>(H), H * D, offset);
  g.output("seen", g.copy(g.update_cache(c, rows, pos)));
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 2u);  // the cache write and the copy

  std::vector<float> expected(B * H * T * D, 0.0f);
  for (int32_t p : {2, 0}) {
    std::vector<float> x(B * n * C);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(100 * p + i);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < D; ++d)
            expected[((b * H + h) * T + p + i) * D + d] = x[(b * n + i) * C + offset + h * D + d];
    auto out = ex.run({{"packed", HostTensor::from_f32({B, n, C}, x)},
                       {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{p})}});
    EXPECT_EQ(out["seen"].to_f32(), expected) << "position " << p;
  }
}

// Externals the graph writes (output_to targets, KV caches) change during a run. Head splits
// and concatenations of them stay copies, made at their place in the node order, and a cache
// write does not read its rows from such an external later than their split did.
std::vector<float> counting(size_t n, float first) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

// A device tensor of shape s holding 1, 2, 3, ...: for externals a graph reads and writes.
struct CountingTensor {
  std::vector<float> values;
  DeviceTensor tensor;
};
CountingTensor counting_tensor(Device& dev, const Shape& s) {
  std::vector<float> v = counting(static_cast<size_t>(s.numel()), 1.0f);
  DeviceTensor t = dev.upload(HostTensor::from_f32(s, v));
  return {std::move(v), std::move(t)};
}

// A Graph moved while a scope on it is open takes the scope along, and leaves it when it ends.
TEST(GraphBuild, AScopeEndsOnTheGraphItsGraphWasMovedTo) {
  Graph outer;
  Tensor x;
  {
    Graph g;
    Graph::Scope scope(g, "inner");
    x = g.input("x", {2, 3});
    outer = std::move(g);
  }
  try {
    outer.matmul(x, x);  // [2,3] x [2,3]: a shape error whose label shows the open scopes
    ADD_FAILURE() << "matmul of [2,3] by [2,3] was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("matmul: ", 0), 0u) << e.what();
  }
}

// Scale factors and the like must be numbers: NaN or an infinity would only ever give NaN outputs.
TEST(GraphBuild, NonFiniteOpOptionsAreRejectedWhereTheOpIsAdded) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  Graph g;
  Tensor q = g.input("q", {1, 1, 2, 4});
  Tensor x = g.input("x", {2, 4});
  auto expect = [](const std::function<void()>& add, const std::string& needle) {
    EXPECT_TRUE(fails_with(add, ErrorCode::invalid_argument, needle));
  };
  AttentionOptions ao;
  ao.scale = nan;
  expect([&] { g.attention(q, q, q, ao); }, "attention: scale is nan, expected a finite number");
  SoftmaxOptions so;
  so.scale = inf;
  expect([&] { g.softmax(x, so); }, "softmax: scale is inf");
  expect([&] { g.scale(x, nan); }, "scale: alpha is nan");
  MatmulOptions mo;
  mo.transpose_b = true;
  mo.alpha = -inf;
  expect([&] { g.matmul(x, x, mo); }, "alpha is -inf");
  PositionalEncodingOptions po;
  po.input_scale = nan;
  expect([&] { g.positional_encoding(x, po); }, "input_scale is nan");
}

TEST_F(DeviceTest, ACacheWriteWhoseResultNobodyReadsStillRuns) {
  // The usual decoder step reads the cache through update_cache's result; here nothing does, and
  // the write (with its position check) must happen all the same.
  const int64_t B = 1, H = 2, T = 4, D = 2;
  DeviceTensor cache = device().allocate({B, H, T, D}, DType::f32);
  Graph g;
  Tensor c = g.external("cache", cache);
  Tensor rows = g.input("rows", {B, H, 1, D});
  Tensor pos = g.input("pos", {1}, DType::i32);
  g.update_cache(c, rows, pos);
  g.output("y", g.relu(rows));
  Executor ex(device(), g);
  auto r = counting(B * H * D, 1.0f);
  ex.run({{"rows", HostTensor::from_f32({B, H, 1, D}, r)},
          {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{1})}});
  std::vector<float> expected(B * H * T * D, 0.0f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) expected[(h * T + 1) * D + d] = r[h * D + d];
  EXPECT_EQ(device().download(cache).to_f32(), expected);
  EXPECT_TRUE(fails_with([&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{100})); },
                         ErrorCode::invalid_argument,
                         "input 'pos': index 100 at position 0 is outside [0, 4): "
                         "update_cache: the position of 1 new row(s) in a cache of 4 rows"));
}

TEST_F(DeviceTest, HeadCopiesOfAWrittenExternalKeepItsContentsAtTheirPlace) {
  const Shape s{2, 1, 3, 4};
  auto [v, state] = counting_tensor(device(), s);
  Graph g;
  Tensor e = g.external("state", state);
  Tensor x = g.concat_heads(e);  // one head: would be a view, but the state is written below
  Tensor flat = g.reshape(e, {s.numel()});  // the same for a reshape
  g.output_to(g.split_heads(g.scale(x, 2.0f), 1), e);
  g.output("before", g.scale(x, 1.0f));  // runs after the write, reads x as it was
  g.output("flat", g.scale(flat, 1.0f));
  Executor ex(device(), g);
  auto out = ex.run({});
  EXPECT_EQ(out["before"].to_f32(), v);
  EXPECT_EQ(out["flat"].to_f32(), v);
  std::vector<float> doubled;
  for (float f : v) doubled.push_back(2 * f);
  EXPECT_EQ(device().download(state).to_f32(), doubled);
}

TEST_F(DeviceTest, AnOpWrittenIntoItsOwnInputReadsACopy) {
  // y = linear(concat(split(e))) written into e: without the copies one matmul would read and
  // write the same bytes.
  const int64_t C = 256;
  auto xv = random_values(C, 5);
  auto wv = random_values(C * C, 6);
  DeviceTensor state = device().upload(HostTensor::from_f32({1, 1, C}, xv));
  Graph g;
  Tensor e = g.external("state", state);
  Tensor w = g.constant("w", HostTensor::from_f32({C, C}, wv));
  g.output_to(g.linear(g.concat_heads(g.split_heads(e, 4)), w), e);
  Executor ex(device(), g);
  ex.run({});
  std::vector<double> want(C, 0.0);
  for (int64_t o = 0; o < C; ++o)
    for (int64_t k = 0; k < C; ++k) want[o] += double(xv[k]) * double(wv[o * C + k]);
  EXPECT_TRUE(all_close(device().download(state), want, {1e-4, 1e-4}));
}

TEST_F(DeviceTest, ACacheReadThroughHeadsBeforeItsUpdateKeepsTheOldRows) {
  auto [v, cache] = counting_tensor(device(), {1, 1, 4, 4});
  Graph g;
  Tensor c = g.external("cache", cache);
  Tensor old = g.concat_heads(c);
  Tensor updated = g.update_cache(c, g.input("rows", {1, 1, 1, 4}), g.input("pos", {1}, DType::i32));
  g.output("old", g.add(old, g.scale(g.concat_heads(updated), 0.0f)));  // read after the update
  Executor ex(device(), g);
  auto out = ex.run({{"rows", HostTensor::from_f32({1, 1, 1, 4}, std::vector<float>(4, -1.0f))},
                     {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{0})}});
  EXPECT_EQ(out["old"].to_f32(), v);
}

TEST_F(DeviceTest, ACacheWriteReadsItsRowsBeforeTheirSourceIsOverwritten) {
  // The rows are split from an external that a later node overwrites; the cache gets the rows
  // as they were at the split.
  const int64_t B = 2, H = 2, T = 4, D = 2, C = 6, offset = 2;
  auto xv = counting(B * C, 1.0f);
  DeviceTensor source = device().upload(HostTensor::from_f32({B, 1, C}, xv));
  DeviceTensor cache = device().allocate({B, H, T, D}, DType::f32);
  Graph g;
  Tensor xs = g.external("source", source);
  Tensor rows = g.split_heads(xs, static_cast<int>(H), H * D, offset);
  g.output_to(g.scale(xs, 10.0f), xs);
  g.output("seen", g.copy(g.update_cache(g.external("cache", cache), rows,
                                         g.input("pos", {1}, DType::i32))));
  Executor ex(device(), g);
  auto out = ex.run({{"pos", HostTensor::from_i32({1}, std::vector<int32_t>{0})}});
  std::vector<float> expected(B * H * T * D, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        expected[((b * H + h) * T) * D + d] = xv[b * C + offset + h * D + d];
  EXPECT_EQ(out["seen"].to_f32(), expected);
}

TEST_F(DeviceTest, ReshapeIsAViewAndInputsConvertDtypes) {
  Graph g;
  Tensor x = g.input("x", {2, 6}, DType::f16);
  Tensor r = g.reshape(x, {3, 4});
  g.output("y", g.add(r, g.constant("c", HostTensor::from_f32({4}, std::vector<float>{1, 2, 3, 4}, DType::f16))));
  Executor ex(device(), g);
  std::vector<float> xs(12);
  for (int i = 0; i < 12; ++i) xs[i] = static_cast<float>(i);
  auto y = ex.run({{"x", HostTensor::from_f32({2, 6}, xs)}})["y"];  // f32 data into an f16 input
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.dtype(), DType::f16);
  auto v = y.to_f32();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], xs[i] + 1 + i % 4);
}

TEST_F(DeviceTest, ProfileNamesEveryOp) {
  Graph g;
  Tensor x = g.input("x", {256});
  Tensor y;
  {
    Graph::Scope scope(g, "block0");
    y = g.gelu(g.scale(x, 2));
  }
  g.output("y", y);
  CompileOptions opts;
  opts.profile = true;
  Executor ex(device(), g, opts);
  ex.run({{"x", HostTensor({256}, DType::f32)}});
  auto prof = ex.profile();
  ASSERT_EQ(prof.size(), 2u);
  EXPECT_EQ(prof[0].op, "block0/scale");
  EXPECT_EQ(prof[1].op, "block0/gelu");
  for (auto& p : prof) EXPECT_GE(p.microseconds, 0.0);
}

// Each op's entry names its kernels, counts its dispatches and the weight bytes they read, so
// that `vkformer bench --model` can break a decoded token down per kernel: the entries add up to
// the recording's own counts.
TEST_F(DeviceTest, ProfileCountsEachOpsKernelsAndWeightBytes) {
  Graph g;
  Tensor x = g.input("x", {3, 64});
  Tensor w = g.constant("w", HostTensor({48, 64}, DType::f32));  // 12288 bytes
  Tensor y;
  {
    Graph::Scope scope(g, "block0");
    y = g.gelu(g.linear(x, w));
  }
  g.output("y", y);
  CompileOptions opts;
  opts.profile = true;
  Executor ex(device(), g, opts);
  ex.run({{"x", HostTensor({3, 64}, DType::f32)}});
  const std::vector<OpTime> prof = ex.profile();
  ASSERT_EQ(prof.size(), 2u);
  EXPECT_EQ(prof[0].op, "block0/linear");
  EXPECT_NE(prof[0].kernels.find("matmul"), std::string::npos) << prof[0].kernels;
  EXPECT_EQ(prof[0].weight_bytes_read, 48u * 64u * 4u);
  EXPECT_EQ(prof[1].op, "block0/gelu");
  EXPECT_EQ(prof[1].weight_bytes_read, 0u);
  size_t dispatches = 0;
  uint64_t bytes = 0;
  for (const OpTime& t : prof) {
    EXPECT_GE(t.dispatches, 1u) << t.op;
    EXPECT_FALSE(t.kernels.empty()) << t.op;
    EXPECT_EQ(t.kernels.find('+'), std::string::npos) << t.op << ": " << t.kernels;  // one kernel each
    dispatches += t.dispatches;
    bytes += t.weight_bytes_read;
  }
  EXPECT_EQ(dispatches, ex.stats().dispatches);
  EXPECT_EQ(bytes, ex.stats().weight_bytes_read);
}

TEST_F(DeviceTest, MisuseGivesClearErrors) {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  g.output("y", g.relu(x));
  EXPECT_THROW(g.input("x", {1}), Error);  // duplicate name
  Executor ex(device(), g);

  auto expect_error = [](const std::function<void()>& fn, ErrorCode code, const std::string& needle) {
    EXPECT_TRUE(fails_with(fn, code, needle));
  };
  expect_error([&] { ex.run(); }, ErrorCode::invalid_argument, "'x' was not set");
  expect_error([&] { ex.output("y"); }, ErrorCode::invalid_argument, "before run");
  expect_error([&] { ex.set_input("z", HostTensor({2, 3}, DType::f32)); },
               ErrorCode::invalid_argument, "it has: x");
  expect_error([&] { ex.set_input("x", HostTensor({3, 2}, DType::f32)); },
               ErrorCode::shape_mismatch, "expected [2,3] f32, got [3,2] f32");
  expect_error([&] { ex.set_input("x", HostTensor({2, 3}, DType::i32)); },
               ErrorCode::shape_mismatch, "got [2,3] i32");
  expect_error([&] { ex.output("nope"); }, ErrorCode::invalid_argument, "no output named 'nope'");

  Graph other;
  Tensor foreign = other.input("f", {2, 3});
  expect_error([&] { g.relu(foreign); }, ErrorCode::invalid_argument, "not a tensor of this graph");
  Graph empty;
  empty.input("x", {1});
  expect_error([&] { Executor e(device(), empty); }, ErrorCode::invalid_argument, "no outputs");
}

// A moved-from Graph, Executor or Device is empty: using it is an error, not a crash.
TEST_F(DeviceTest, MovedFromObjectsSaySo) {
  auto expect_moved_from = [](const std::function<void()>& fn, const std::string& what) {
    EXPECT_TRUE(fails_with(fn, ErrorCode::invalid_argument, "this " + what + " was moved from"));
  };
  Graph g;
  Tensor x = g.input("x", {2, 3});
  g.output("y", g.relu(x));
  Graph g2 = std::move(g);
  expect_moved_from([&] { g.input("z", {1}); }, "graph");
  expect_moved_from([&] { g.relu(x); }, "graph");
  expect_moved_from([&] { Executor e(device(), g); }, "graph");

  Executor ex(device(), g2);
  Executor ex2 = std::move(ex);
  expect_moved_from([&] { ex.run({{"x", HostTensor({2, 3}, DType::f32)}}); }, "executor");
  expect_moved_from([&] { ex.stats(); }, "executor");
  EXPECT_EQ(ex2.run({{"x", HostTensor({2, 3}, DType::f32)}}).at("y").shape(), (Shape{2, 3}));

  Device d = device();
  Device d2 = std::move(d);
  expect_moved_from([&] { d.info(); }, "device");
  expect_moved_from([&] { d.allocate({2}, DType::f32); }, "device");
  expect_moved_from([&] { Executor e(d, g2); }, "device");
}

}  // namespace
}  // namespace vkformer::testing

namespace vkformer::testing {
namespace {

// CompileOptions::timestamps: two timestamps around each replay, nothing else changes.
TEST_F(DeviceTest, TimestampsTimeEveryRunWithoutChangingTheRecording) {
  if (!device().info().timestamps) GTEST_SKIP() << "the device has no timestamp queries";
  const Shape shape{5, 131};
  Graph g = chain_graph(shape, 12);
  CompileOptions opts;
  opts.timestamps = true;
  Executor timed(device(), g, opts);
  Executor plain(device(), g);
  EXPECT_LT(timed.last_gpu_microseconds(), 0.0);  // nothing has run yet

  auto xv = random_values(shape.numel(), 5, -2.0f, 2.0f);
  std::map<std::string, HostTensor> in{{"x", HostTensor::from_f32(shape, xv)}};
  auto a = timed.run(in);
  double first = timed.last_gpu_microseconds();
  EXPECT_GT(first, 0.0);
  EXPECT_LT(first, 60e6);  // a minute: the ticks were masked and scaled, not garbage
  auto b = plain.run(in);
  EXPECT_EQ(std::memcmp(a["y"].data(), b["y"].data(), a["y"].nbytes()), 0);
  EXPECT_EQ(timed.stats().barriers, plain.stats().barriers);
  EXPECT_EQ(timed.stats().dispatches, plain.stats().dispatches);
  EXPECT_TRUE(timed.profile().empty());  // per-op profiling stays off

  timed.run();  // a replay gets its own time
  EXPECT_GT(timed.last_gpu_microseconds(), 0.0);
  EXPECT_EQ(timed.stats().recordings, 1u);

  try {
    plain.last_gpu_microseconds();
    ADD_FAILURE() << "expected an error without CompileOptions::timestamps";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("CompileOptions::timestamps"), std::string::npos);
  }
}

}  // namespace
}  // namespace vkformer::testing

namespace vkformer::testing {
namespace {

// ------------------------------------------------------------------------------- threads

// One thread's work on the shared device: its own graph (matmul, then softmax and layer norm of
// the product) with shapes of its own, compiled while the other threads compile theirs, then run
// `runs` times with a new input, a Device::write of the external B, a round trip of a fresh
// tensor and a download between runs. Returns what went wrong, or "".
std::string run_thread_case(Device& device, int t, int runs) {
  const int64_t m = 3 + t, k = 5 + 2 * t, n = 7 + 3 * t;
  const float scale = 0.5f, eps = 1e-5f;
  auto gamma = random_values(n, 100 + t, 0.5f, 1.5f), beta = random_values(n, 200 + t);
  DeviceTensor b = device.allocate({k, n}, DType::f32);
  Graph g;
  Tensor ab = g.matmul(g.input("a", {m, k}), g.external("b", b));
  SoftmaxOptions so;
  so.scale = scale;
  g.output("probs", g.softmax(ab, so));
  g.output("normed", g.layer_norm(ab, g.constant("gamma", HostTensor::from_f32({n}, gamma)),
                                  g.constant("beta", HostTensor::from_f32({n}, beta)), eps));
  Executor ex(device, g);

  const Tolerance tol{1e-4, 1e-4};
  for (int i = 0; i < runs; ++i) {
    auto av = random_values(m * k, 1000 * t + i), bv = random_values(k * n, 2000 * t + i);
    HostTensor hb = HostTensor::from_f32({k, n}, bv);
    device.write(b, hb);
    ex.set_input("a", HostTensor::from_f32({m, k}, av));
    ex.run();

    auto x = ref::matmul(stored(av, DType::f32), stored(bv, DType::f32), 1, 1, m, n, k, false,
                         nullptr, 1.0);
    ref::SoftmaxMasks masks;
    masks.scale = scale;
    auto probs = all_close(ex.output("probs"), ref::softmax(x, 1, 1, m, n, masks), tol);
    auto normed = all_close(ex.output("normed"),
                            ref::layer_norm(x, m, n, stored(gamma, DType::f32),
                                            stored(beta, DType::f32), eps),
                            tol);
    if (!probs) return "run " + std::to_string(i) + ": probs: " + probs.message();
    if (!normed) return "run " + std::to_string(i) + ": normed: " + normed.message();

    HostTensor ha = HostTensor::from_f32({m, k}, av);
    HostTensor back = device.download(device.upload(ha));
    if (std::memcmp(back.data(), ha.data(), ha.nbytes()) != 0)
      return "run " + std::to_string(i) + ": an uploaded tensor came back changed";
    HostTensor b_back = device.download(b);
    if (std::memcmp(b_back.data(), hb.data(), hb.nbytes()) != 0)
      return "run " + std::to_string(i) + ": B came back changed";
  }
  if (ex.stats().runs != static_cast<size_t>(runs) || ex.stats().recordings != 1)
    return "expected " + std::to_string(runs) + " runs of one recording";
  return "";
}

// Distinct executors may be compiled and run from different threads at once on one Device
// (README, "Threads"); uploads, writes and downloads in between are safe too. The validation
// layer's thread-safety checks (DeviceTest::TearDown) must stay silent.
TEST_F(DeviceTest, ThreadsSharingADeviceCompileAndRunTheirOwnExecutors) {
  constexpr int kThreads = 4, kRuns = 20;
  Latch start(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // all at once, so that compiles and runs overlap
      try {
        failures[t] = run_thread_case(device(), t, kRuns);
      } catch (const std::exception& e) {
        failures[t] = std::string("threw: ") + e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

}  // namespace
}  // namespace vkformer::testing
