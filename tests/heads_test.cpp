// split_heads and concat_heads against the double-precision references. Both are pure copies,
// so every case must match exactly (tolerance 0), in f32 and f16 alike.
#include <functional>
#include <string>

#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

constexpr Tolerance kExact{0.0, 0.0};

struct HeadsCase {
  int64_t b, s, h, d;
  int64_t offset;    // split: first column taken from the packed row
  int64_t trailing;  // split: columns after the heads' columns, so C = offset + H*D + trailing
  DType dtype;
};

std::string heads_name(const ::testing::TestParamInfo<HeadsCase>& info) {
  const auto& c = info.param;
  return "B" + std::to_string(c.b) + "_S" + std::to_string(c.s) + "_H" + std::to_string(c.h) +
         "_D" + std::to_string(c.d) + "_off" + std::to_string(c.offset) + "_tail" +
         std::to_string(c.trailing) + "_" + std::string(dtype_name(c.dtype));
}

class HeadsTest : public DeviceTestWithParam<HeadsCase> {};

TEST_P(HeadsTest, SplitTakesColumnsAtOffset) {
  const auto& c = GetParam();
  const int64_t C = c.offset + c.h * c.d + c.trailing;
  const Shape shape{c.b, c.s, C};
  auto values = random_values(shape.numel(), 11);
  Graph g;
  Tensor x = g.input("x", shape, c.dtype);
  // width is given only when the heads do not run to the end of the row, so the default
  // (C - offset) is exercised too.
  Tensor y = c.trailing ? g.split_heads(x, static_cast<int>(c.h), c.h * c.d, c.offset)
                        : g.split_heads(x, static_cast<int>(c.h), -1, c.offset);
  ASSERT_EQ(y.shape, (Shape{c.b, c.h, c.s, c.d}));
  g.output("y", y);
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, values, c.dtype)}});
  auto want = ref::split_heads(stored(values, c.dtype), c.b, c.s, C, c.h, c.d, c.offset);
  EXPECT_TRUE(all_close(out["y"], want, kExact));
}

TEST_P(HeadsTest, ConcatIsTheInverseLayout) {
  const auto& c = GetParam();
  const Shape shape{c.b, c.h, c.s, c.d};
  auto values = random_values(shape.numel(), 12);
  Graph g;
  Tensor x = g.input("x", shape, c.dtype);
  Tensor y = g.concat_heads(x);
  ASSERT_EQ(y.shape, (Shape{c.b, c.s, c.h * c.d}));
  g.output("y", y);
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, values, c.dtype)}});
  auto want = ref::concat_heads(stored(values, c.dtype), c.b, c.h, c.s, c.d);
  EXPECT_TRUE(all_close(out["y"], want, kExact));
}

TEST_P(HeadsTest, SplitThenConcatRoundTrips) {
  const auto& c = GetParam();
  const Shape shape{c.b, c.s, c.h * c.d};
  auto values = random_values(shape.numel(), 13);
  Graph g;
  Tensor x = g.input("x", shape, c.dtype);
  g.output("y", g.concat_heads(g.split_heads(x, static_cast<int>(c.h))));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, values, c.dtype)}});
  EXPECT_TRUE(all_close(out["y"], stored(values, c.dtype), kExact));
}

// D, C and offset multiples of 4 take the vec4 kernel; anything else the scalar one. Sizes are
// 1, primes, and more elements than one 256-invocation workgroup covers.
INSTANTIATE_TEST_SUITE_P(
    Shapes, HeadsTest,
    ::testing::Values(HeadsCase{1, 1, 1, 1, 0, 0, DType::f32},
                      HeadsCase{1, 1, 1, 1, 1, 2, DType::f32},
                      HeadsCase{2, 7, 3, 5, 0, 0, DType::f32},
                      HeadsCase{2, 7, 3, 5, 3, 1, DType::f32},
                      HeadsCase{3, 13, 4, 16, 0, 0, DType::f32},   // vec4
                      HeadsCase{3, 13, 4, 16, 8, 4, DType::f32},   // vec4 with offset
                      HeadsCase{3, 13, 4, 16, 2, 2, DType::f32},   // offset breaks vec4
                      HeadsCase{1, 131, 2, 3, 0, 0, DType::f32},
                      HeadsCase{2, 5, 1, 67, 0, 0, DType::f32},
                      HeadsCase{1, 1, 1, 1, 0, 0, DType::f16},
                      HeadsCase{2, 7, 3, 5, 3, 1, DType::f16},
                      HeadsCase{3, 13, 4, 16, 8, 4, DType::f16},  // vec4 (f16vec4)
                      HeadsCase{2, 37, 8, 12, 0, 0, DType::f16}),
    heads_name);

// A packed [B, S, 3E] projection split into Q, K and V by offset, as attention blocks do.
class PackedQkvTest : public DeviceTestWithParam<std::tuple<int64_t, int64_t, DType>> {};

TEST_P(PackedQkvTest, SplitsQkvByOffset) {
  const auto& [heads, head_dim, dtype] = GetParam();
  const int64_t B = 2, S = 9, E = heads * head_dim, C = 3 * E;
  const Shape shape{B, S, C};
  auto values = random_values(shape.numel(), 21);
  auto xs = stored(values, dtype);
  Graph g;
  Tensor x = g.input("qkv", shape, dtype);
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i)
    g.output(names[i], g.split_heads(x, static_cast<int>(heads), E, i * E));
  Executor ex(device(), g);
  auto out = ex.run({{"qkv", make_tensor(shape, values, dtype)}});
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(out[names[i]], ref::split_heads(xs, B, S, C, heads, head_dim, i * E),
                          kExact))
        << names[i];
}

INSTANTIATE_TEST_SUITE_P(Shapes, PackedQkvTest,
                         ::testing::Values(std::make_tuple(int64_t{4}, int64_t{8}, DType::f32),
                                           std::make_tuple(int64_t{3}, int64_t{5}, DType::f32),
                                           std::make_tuple(int64_t{4}, int64_t{8}, DType::f16),
                                           std::make_tuple(int64_t{3}, int64_t{5}, DType::f16)));

// Splits and concatenations that move nothing (a single position, as in a decoding step, or a
// single head, with all of the columns) alias their input: no dispatch, the same bytes. Taking
// part of the columns still copies, and so does a view written into a target.
TEST_F(DeviceTest, HeadCopiesThatMoveNothingAreViews) {
  const int64_t B = 3, C = 8, H = 2, D = 4;
  auto values = random_values(B * C, 31);
  DeviceTensor target = device().allocate({B, H, 1, D}, DType::f32);
  Graph g;
  Tensor x = g.input("x", {B, 1, C});
  Tensor heads = g.split_heads(x, static_cast<int>(H));          // a view
  g.output("heads", heads);
  g.output("doubled", g.concat_heads(g.scale(heads, 2.0f)));     // the scale, then a view
  g.output("first", g.split_heads(x, static_cast<int>(H), C / 2, 0));  // a copy
  g.output_to(g.split_heads(x, static_cast<int>(H)), g.external("target", target));  // a copy
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 3u);  // scale, the partial split, the split into the target
  auto out = ex.run({{"x", HostTensor::from_f32({B, 1, C}, values)}});
  const auto split = ref::split_heads(stored(values, DType::f32), B, 1, C, H, D, 0);
  EXPECT_TRUE(all_close(out["heads"], split, kExact));
  std::vector<double> doubled;
  for (float v : values) doubled.push_back(2.0 * v);
  EXPECT_TRUE(all_close(out["doubled"], doubled, kExact));
  EXPECT_TRUE(all_close(out["first"], ref::split_heads(stored(values, DType::f32), B, 1, C, 1, C / 2, 0),
                        kExact));
  EXPECT_TRUE(all_close(device().download(target), split, kExact));
}

// A single row (batch 1, one position: a decoding step) split into heads is a run of the row's
// columns whatever the heads: a view where the run starts at an offset the device lets a binding
// start at (256 bytes suits every Vulkan device), a copy otherwise.
TEST_F(DeviceTest, OneRowSplitIsAViewAtAnAlignedOffset) {
  const int64_t C = 160, H = 2, W = 32;
  auto values = random_values(C, 32);
  Graph g;
  Tensor row = g.input("row", {1, 1, C});
  g.output("aligned", g.split_heads(row, static_cast<int>(H), W, 64));  // from byte 256
  g.output("unaligned", g.split_heads(row, static_cast<int>(H), W, 1));  // from byte 4
  Executor ex(device(), g);
  const DeviceInfo& info = device().info();
  const bool byte_4_binds =
      info.min_storage_buffer_offset_alignment <= 4 && info.min_texel_buffer_offset_alignment <= 4;
  EXPECT_EQ(ex.stats().dispatches, byte_4_binds ? 0u : 1u);
  auto out = ex.run({{"row", HostTensor::from_f32({1, 1, C}, values)}});
  const auto xs = stored(values, DType::f32);
  EXPECT_TRUE(all_close(out["aligned"], ref::split_heads(xs, 1, 1, C, H, W / H, 64), kExact));
  EXPECT_TRUE(all_close(out["unaligned"], ref::split_heads(xs, 1, 1, C, H, W / H, 1), kExact));
}

// The shape error's message, which must name the op and the offending shape.
std::string shape_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::shape_mismatch) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a shape error";
  return "";
}

TEST_F(DeviceTest, SplitHeadsRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 3, 12});
  auto m = shape_error_of([&] { g.split_heads(x, 5); });
  EXPECT_NE(m.find("split_heads"), std::string::npos) << m;
  EXPECT_NE(m.find("[2,3,12]"), std::string::npos) << m;
  EXPECT_NE(m.find("not divisible by 5 heads"), std::string::npos) << m;
  m = shape_error_of([&] { g.split_heads(x, 2, 8, 6); });
  EXPECT_NE(m.find("[6, 14)"), std::string::npos) << m;
  m = shape_error_of([&] { g.split_heads(x, 2, -1, 13); });
  EXPECT_NE(m.find("offset 13"), std::string::npos) << m;
  m = shape_error_of([&] { g.split_heads(x, 0); });
  EXPECT_NE(m.find("heads"), std::string::npos) << m;
  Tensor r4 = g.input("r4", {2, 3, 4, 5});
  m = shape_error_of([&] { g.split_heads(r4, 1); });
  EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
  Tensor r3 = g.input("r3", {2, 3, 4});
  m = shape_error_of([&] { g.concat_heads(r3); });
  EXPECT_NE(m.find("concat_heads"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 4"), std::string::npos) << m;
}

}  // namespace
}  // namespace vkformer::testing
