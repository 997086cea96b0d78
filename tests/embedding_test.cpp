// embedding and positional_encoding against the double-precision references.
//
// embedding copies table rows, so it must match exactly (tolerance 0) in f32 and f16.
// positional_encoding adds an f32 table built on the host with PyTorch's float32 arithmetic;
// see PositionalEncodingTest below for its tolerances.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

constexpr Tolerance kExact{0.0, 0.0};



struct EmbeddingCase {
  Shape ids;
  int64_t vocab, d;
  DType dtype;
};

std::string embedding_name(const ::testing::TestParamInfo<EmbeddingCase>& info) {
  const auto& c = info.param;
  return "ids" + shape_name(c.ids) + "_V" + std::to_string(c.vocab) + "_D" + std::to_string(c.d) +
         "_" + std::string(dtype_name(c.dtype));
}

class EmbeddingTest : public DeviceTestWithParam<EmbeddingCase> {};

TEST_P(EmbeddingTest, GathersTableRows) {
  const auto& c = GetParam();
  auto ids = random_ids(c.ids.numel(), c.vocab, 31);
  auto table = random_values(c.vocab * c.d, 32);
  Graph g;
  Tensor i = g.input("ids", c.ids, DType::i32);
  Tensor t = g.constant("table", make_tensor({c.vocab, c.d}, table, c.dtype));
  Tensor y = g.embedding(i, t);
  std::vector<int64_t> want_shape = c.ids.dims();
  want_shape.push_back(c.d);
  ASSERT_EQ(y.shape, Shape(want_shape));
  g.output("y", y);
  Executor ex(device(), g);
  auto out = ex.run({{"ids", HostTensor::from_i32(c.ids, ids)}});
  EXPECT_TRUE(all_close(out["y"], ref::embedding(ids, stored(table, c.dtype), c.d), kExact));
}

// D a multiple of 4 takes the vec4 kernel; ids of rank 1 to 3; V = 1; more elements than a
// workgroup covers.
INSTANTIATE_TEST_SUITE_P(
    Shapes, EmbeddingTest,
    ::testing::Values(EmbeddingCase{{1}, 1, 1, DType::f32}, EmbeddingCase{{5}, 11, 7, DType::f32},
                      EmbeddingCase{{2, 3}, 50, 16, DType::f32},
                      EmbeddingCase{{2, 3, 5}, 3, 1, DType::f32},
                      EmbeddingCase{{4, 33}, 1000, 130, DType::f32},
                      EmbeddingCase{{3, 67}, 257, 64, DType::f32},
                      EmbeddingCase{{1}, 1, 1, DType::f16}, EmbeddingCase{{7}, 13, 5, DType::f16},
                      EmbeddingCase{{2, 31}, 100, 32, DType::f16},
                      EmbeddingCase{{2, 3, 5}, 17, 130, DType::f16}),
    embedding_name);

// An out-of-range id in a graph input is rejected when it is set, naming the input and the id.
TEST_F(DeviceTest, EmbeddingRejectsOutOfRangeIds) {
  Graph g;
  Tensor ids = g.input("token_ids", {2, 3}, DType::i32);
  Tensor table = g.constant("table", make_tensor({10, 4}, random_values(40, 1), DType::f32));
  g.output("y", g.embedding(ids, table));
  Executor ex(device(), g);
  for (int32_t bad : {10, -1, 1 << 30}) {
    std::vector<int32_t> v = {1, 2, 3, bad, 4, 5};
    try {
      ex.set_input("token_ids", HostTensor::from_i32({2, 3}, v));
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      std::string m = e.what();
      EXPECT_NE(m.find("token_ids"), std::string::npos) << m;
      EXPECT_NE(m.find(std::to_string(bad)), std::string::npos) << m;
      EXPECT_NE(m.find("[0, 10)"), std::string::npos) << m;
    }
  }
  // Good ids still work afterwards.
  std::vector<int32_t> v = {9, 0, 3, 3, 4, 5};
  ex.set_input("token_ids", HostTensor::from_i32({2, 3}, v));
  ex.run();
  auto want = ref::embedding(v, stored(random_values(40, 1), DType::f32), 4);
  EXPECT_TRUE(all_close(ex.output("y"), want, kExact));
}

// The check follows the ids through a reshape back to the graph input.
TEST_F(DeviceTest, EmbeddingChecksIdsThroughReshape) {
  Graph g;
  Tensor ids = g.input("ids", {6}, DType::i32);
  Tensor table = g.constant("table", make_tensor({5, 3}, random_values(15, 2), DType::f32));
  g.output("y", g.embedding(g.reshape(ids, {2, 3}), table));
  Executor ex(device(), g);
  std::vector<int32_t> v = {0, 1, 2, 3, 4, 5};
  try {
    ex.set_input("ids", HostTensor::from_i32({6}, v));
    ADD_FAILURE() << "id 5 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'ids'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos) << e.what();
  }
}

// Ids that are not a graph input (a constant here, or a device tensor) are not checked on the
// host; the shader clamps them into [0, V) so nothing reads out of bounds.
// Ids in an external tensor are device data the executor never sees: the shader clamps them.
TEST_F(DeviceTest, EmbeddingClampsIdsOfAnExternalTensor) {
  const int64_t vocab = 4, d = 3;
  auto table = random_values(vocab * d, 3);
  std::vector<int32_t> ids = {-5, 0, 3, 4, 1000000, INT32_MIN, INT32_MAX};
  const int64_t n = static_cast<int64_t>(ids.size());
  Graph g;
  Tensor t = g.constant("table", make_tensor({vocab, d}, table, DType::f32));
  Tensor e = g.external("ext_ids", device().upload(HostTensor::from_i32({n}, ids)));
  g.output("y_ext", g.embedding(e, t));
  Executor ex(device(), g);
  auto out = ex.run({});
  std::vector<int32_t> clamped;
  for (int32_t id : ids) clamped.push_back(std::clamp<int32_t>(id, 0, vocab - 1));
  auto want = ref::embedding(clamped, stored(table, DType::f32), d);
  EXPECT_TRUE(all_close(out["y_ext"], want, kExact));
}

// Constant ids are known when the graph is compiled: one outside the table is an error then.
TEST_F(DeviceTest, EmbeddingRejectsConstantIdsOutsideTheTable) {
  const int64_t vocab = 4, d = 3;
  Graph g;
  Tensor t = g.constant("table", HostTensor({vocab, d}, DType::f32));
  Tensor ok = g.constant("ok", HostTensor::from_i32({2}, std::vector<int32_t>{0, 3}));
  Tensor bad = g.constant("bad", HostTensor::from_i32({3}, std::vector<int32_t>{1, 2, 4}));
  g.output("y", g.embedding(ok, t));
  g.output("z", g.embedding(g.reshape(bad, {1, 3}), t));
  EXPECT_TRUE(fails_with([&] { Executor ex(device(), g); }, ErrorCode::invalid_argument,
                         "constant index 4 at position 2 is outside [0, 4)"));
}

TEST_F(DeviceTest, EmbeddingRejectsBadArguments) {
  Graph g;
  Tensor fids = g.input("fids", {3});
  Tensor ids = g.input("ids", {3}, DType::i32);
  Tensor ids4 = g.input("ids4", {1, 2, 3, 4}, DType::i32);
  Tensor table = g.input("table", {5, 4});
  Tensor table3 = g.input("table3", {1, 5, 4});
  EXPECT_THROW(g.embedding(fids, table), Error);
  EXPECT_THROW(g.embedding(ids4, table), Error);
  EXPECT_THROW(g.embedding(ids, table3), Error);
  EXPECT_THROW(g.embedding(ids, ids), Error);
}

// ---- positional_encoding ----------------------------------------------------------------

// Tolerance against the double reference, for positions < 100: the kernel's table follows
// PyTorch's float32 arithmetic, whose angle float32(pos) * float32(div_term) carries two
// roundings: div_term to float32 (relative 2^-24, times pos < 100: up to 6e-6 rad) and the
// product (half an ulp of angles < 100: up to 3.8e-6 rad). sin/cos move by at most as much, so
// the table is within 1e-5 of the exact one; x * scale adds fp32 rounding of values of order
// 10, covered by rtol. For large positions these errors grow with pos (at pos ~ 5000 the angle
// is off by ~5e-4 rad), so there the test compares with PyTorch's float32 table instead
// (PositionalEncodingLargePositionsFollowFloat32Angles).
constexpr Tolerance kPeTolerance{1.2e-5, 1e-5};

struct PeCase {
  Shape shape;  // [S, D] or [B, S, D]
  int64_t offset;
  DType dtype;
};

std::string pe_name(const ::testing::TestParamInfo<PeCase>& info) {
  return shape_name(info.param.shape) + "_off" + std::to_string(info.param.offset) + "_" +
         std::string(dtype_name(info.param.dtype));
}

// x * scale + pe[first + s] in double, from the stored x.
std::vector<double> pe_reference(const std::vector<double>& x, const Shape& shape, float scale,
                                 const std::function<int64_t(int64_t)>& position) {
  const int64_t d = shape.back(), s = shape[-2];
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t j = static_cast<int64_t>(i) % d, row = (static_cast<int64_t>(i) / d) % s;
    want[i] = x[i] * static_cast<double>(scale) + ref::positional_encoding(position(row), j, d);
  }
  return want;
}

class PositionalEncodingTest : public DeviceTestWithParam<PeCase> {};

TEST_P(PositionalEncodingTest, AddsScaledTable) {
  const auto& [shape, offset, dtype] = GetParam();
  const int64_t d = shape.back();
  const float scale = std::sqrt(static_cast<float>(d));  // input_scale = sqrt(d_model)
  auto xv = random_values(shape.numel(), 41);
  Graph g;
  Tensor x = g.input("x", shape, dtype);
  PositionalEncodingOptions o;
  o.input_scale = scale;
  o.offset = offset;
  g.output("y", g.positional_encoding(x, o));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, xv, dtype)}});
  auto want = pe_reference(stored(xv, dtype), shape, scale,
                           [&](int64_t s) { return offset + s; });
  EXPECT_TRUE(all_close(out["y"], want, dtype == DType::f16 ? default_tolerance(dtype) : kPeTolerance));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want)));
}

// Odd D (the last column has no cosine partner), D = 1, batch > 1, S prime; positions < 100.
INSTANTIATE_TEST_SUITE_P(
    Shapes, PositionalEncodingTest,
    ::testing::Values(PeCase{{1, 1}, 0, DType::f32}, PeCase{{5, 7}, 0, DType::f32},
                      PeCase{{5, 7}, 3, DType::f32}, PeCase{{2, 13, 16}, 0, DType::f32},
                      PeCase{{3, 31, 33}, 50, DType::f32}, PeCase{{1, 97, 64}, 2, DType::f32},
                      PeCase{{4, 11, 512}, 80, DType::f32}, PeCase{{1, 1}, 0, DType::f16},
                      PeCase{{2, 13, 17}, 5, DType::f16}, PeCase{{1, 97, 64}, 0, DType::f16}),
    pe_name);

// PyTorch's table in float32, written from the tutorial's code: div_term = exp(arange(0, d, 2)
// * (-ln(10000) / d)) and the angle position * div_term in float32; sin/cos of that float.
double torch_pe(int64_t pos, int64_t dim, int64_t d) {
  float c = static_cast<float>(-std::log(10000.0) / static_cast<double>(d));
  float div_term = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(dim - dim % 2) * c)));
  float angle = static_cast<float>(pos) * div_term;
  return static_cast<float>(dim % 2 == 0 ? std::sin(static_cast<double>(angle))
                                         : std::cos(static_cast<double>(angle)));
}

// At positions near 5000 the float32 angle differs from the exact one by up to ~5e-4 rad, and
// so does the table; it must still match PyTorch's float32 table to fp32 rounding.
TEST_F(DeviceTest, PositionalEncodingLargePositionsFollowFloat32Angles) {
  const Shape shape{10, 64};
  const int64_t offset = 4990;
  std::vector<float> xv(shape.numel(), 0.0f);
  Graph g;
  Tensor x = g.input("x", shape);
  PositionalEncodingOptions o;
  o.offset = offset;
  g.output("y", g.positional_encoding(x, o));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, xv, DType::f32)}});
  std::vector<double> torch(shape.numel()), exact(shape.numel());
  for (int64_t s = 0; s < shape[0]; ++s)
    for (int64_t j = 0; j < shape[1]; ++j) {
      torch[s * shape[1] + j] = torch_pe(offset + s, j, shape[1]);
      exact[s * shape[1] + j] = ref::positional_encoding(offset + s, j, shape[1]);
    }
  EXPECT_TRUE(all_close(out["y"], torch, {1e-7, 0.0}));
  double vs_exact = max_abs_error(out["y"], exact);
  EXPECT_LT(vs_exact, 1e-3);
  RecordProperty("max_abs_error_vs_float32_torch", sci(max_abs_error(out["y"], torch)));
  RecordProperty("max_abs_error_vs_double", sci(vs_exact));
}

// A run-time offset (decoding with a KV cache): the same Executor, replayed with a new offset,
// reads other rows of its max_len table. The static offset is added to it; positions beyond the
// table repeat its last row and negative ones its first.
TEST_F(DeviceTest, PositionalEncodingOffsetTensorChangesBetweenRuns) {
  for (DType dtype : {DType::f32, DType::f16}) {
    const Shape shape{2, 3, 10};
    const int64_t max_len = 60, static_offset = 2;
    const float scale = std::sqrt(10.0f);
    auto xv = random_values(shape.numel(), 42);
    Graph g;
    Tensor x = g.input("x", shape, dtype);
    Tensor pos = g.input("pos", {1}, DType::i32);
    PositionalEncodingOptions o;
    o.input_scale = scale;
    o.offset = static_offset;
    o.offset_tensor = pos;
    o.max_len = max_len;
    g.output("y", g.positional_encoding(x, o));
    Executor ex(device(), g);
    ex.set_input("x", make_tensor(shape, xv, dtype));
    auto tol = dtype == DType::f16 ? default_tolerance(dtype) : kPeTolerance;
    // The last offset that keeps every row in the table: static_offset + p + S = max_len.
    const int32_t last = static_cast<int32_t>(max_len - static_offset - shape[1]);
    // A negative offset tensor is fine while static_offset + p >= 0.
    for (int32_t p : {0, 37, 7, last, -static_cast<int32_t>(static_offset)}) {
      ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{p}));
      ex.run();
      auto want = pe_reference(stored(xv, dtype), shape, scale,
                               [&](int64_t s) { return static_offset + p + s; });
      EXPECT_TRUE(all_close(ex.output("y"), want, tol)) << "offset tensor " << p;
    }
    EXPECT_EQ(ex.stats().recordings, 1u);
    for (int32_t p : {last + 1, 100, -static_cast<int32_t>(static_offset) - 1}) {
      auto set = [&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{p})); };
      EXPECT_TRUE(fails_with(set, ErrorCode::invalid_argument, "input 'pos': index " + std::to_string(p)));
      EXPECT_TRUE(fails_with(set, ErrorCode::invalid_argument,
                             "positional_encoding: offset 2 + offset_tensor + 3 rows must stay within "
                             "the table's positions [0, 60]"));
    }
  }
}

TEST_F(DeviceTest, PositionalEncodingRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 10, 8});
  PositionalEncodingOptions o;
  o.offset = 95;
  o.max_len = 100;
  try {
    g.positional_encoding(x, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("positional_encoding"), std::string::npos) << m;
    EXPECT_NE(m.find("[95, 105)"), std::string::npos) << m;
    EXPECT_NE(m.find("max_len 100"), std::string::npos) << m;
  }
  o = {};
  o.offset_tensor = g.input("fpos", {1});
  EXPECT_THROW(g.positional_encoding(x, o), Error);  // not i32
  o.offset_tensor = g.input("pos2", {2}, DType::i32);
  EXPECT_THROW(g.positional_encoding(x, o), Error);  // not [1]
  EXPECT_THROW(g.positional_encoding(g.input("r1", {8}), {}), Error);
  o = {};
  o.offset = -1;
  EXPECT_THROW(g.positional_encoding(x, o), Error);
}

}  // namespace
}  // namespace vkformer::testing
