// File formats without a device: safetensors and .npy round trips, the golden fixtures written by
// tests/fixtures/make_golden.py, targeted corruptions (each must be an Error naming the problem), every
// truncation, and a seeded mutation loop that must never crash.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "special_files.hpp"
#include "test_util.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------- helpers

// A scratch directory for this process, removed at exit.
const fs::path& scratch() { return vkformer::testing::scratch_dir("io_test"); }

fs::path golden_dir() { return fs::path(__FILE__).parent_path() / "golden"; }

std::vector<std::byte> to_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::vector<std::byte> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return to_bytes(s);
}

void write_file(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A safetensors file from a header text (padded with spaces to a multiple of 8) and data.
std::vector<std::byte> make_st(std::string header, std::string_view data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return to_bytes(le64(header.size()) + header + std::string(data));
}

// A .npy file from a header dict text (padded like NumPy) and data, in format `version`.
std::vector<std::byte> make_npy(std::string dict, std::string_view data, int version = 1) {
  const size_t prefix = version == 1 ? 10 : 12;
  dict.append(63 - (prefix + dict.size()) % 64, ' ');
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(version);
  s += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) s += static_cast<char>(dict.size() >> (8 * i));
  return to_bytes(s + dict + std::string(data));
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

using vkformer::testing::fails_with;  // test_util

::testing::AssertionResult st_fails(const std::vector<std::byte>& bytes, std::string_view needle,
                                  ErrorCode code = ErrorCode::format) {
  return fails_with([&] { SafetensorsFile::from_bytes(bytes, "bad.safetensors"); }, code, needle);
}

::testing::AssertionResult npy_fails(const std::vector<std::byte>& bytes, std::string_view needle,
                                   ErrorCode code = ErrorCode::format) {
  return fails_with([&] { parse_npy(bytes, "bad.npy"); }, code, needle);
}

// The bytes of a tensor, to compare bit for bit (NaN payloads and -0 included).
std::vector<std::byte> bytes_of(const HostTensor& t) { return {t.data(), t.data() + t.nbytes()}; }

// Float values that exercise the edges: signed zeros, infinities, NaN, subnormals, large.
std::vector<float> test_floats(size_t n, uint32_t seed) {
  const float specials[] = {0.0f,   -0.0f,    INFINITY, -INFINITY, NAN,
                            1e-40f, -6.0e-8f, 65504.0f, 1.0f / 3,  -1e30f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i < std::size(specials) ? specials[i] : dist(rng);
  return v;
}

std::vector<int32_t> test_ints(size_t n, uint32_t seed) {
  const int32_t specials[] = {0, -1, 1, std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max()};
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i < std::size(specials) ? specials[i] : static_cast<int32_t>(rng());
  return v;
}

HostTensor make_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  const auto n = static_cast<size_t>(shape.numel());
  if (dtype == DType::i32) return HostTensor::from_i32(shape, test_ints(n, seed));
  return HostTensor::from_f32(shape, test_floats(n, seed), dtype);
}

const std::vector<Shape>& test_shapes() {
  static const std::vector<Shape> shapes = {
      Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 1, 3}, Shape{2, 3, 1, 2}, Shape{0}, Shape{3, 0}};
  return shapes;
}

// A small valid safetensors file (three dtypes, metadata) and a small valid .npy.
std::vector<std::byte> small_safetensors() {
  const fs::path p = scratch() / "small.safetensors";
  std::vector<std::pair<std::string, HostTensor>> t;
  t.emplace_back("a", make_tensor({2, 3}, DType::f32, 1));
  t.emplace_back("b", make_tensor({3}, DType::f16, 2));
  t.emplace_back("c", make_tensor({2}, DType::i32, 3));
  write_safetensors(p, t, {{"format", "pt"}});
  return file_bytes(p);
}

std::vector<std::byte> small_npy() {
  return make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }",
                  raw<int64_t>({1, -2, 3, 4, 5, -6}));
}

std::optional<int64_t> json_int(const std::string& text, const std::string& key) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("\"" + key + "\"\\s*:\\s*(-?[0-9]+)")))
    return std::stoll(m[1]);
  return std::nullopt;
}

std::string json_string(const std::string& text, const std::string& key) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("\"" + key + "\"\\s*:\\s*\"([^\"]*)\""))) return m[1];
  return "";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// ------------------------------------------------------------------------------- safetensors

TEST(Safetensors, RoundTripsEveryDtypeAndRank) {
  for (bool with_metadata : {false, true}) {
    SCOPED_TRACE(with_metadata ? "with metadata" : "without metadata");
    std::vector<std::pair<std::string, HostTensor>> written;
    uint32_t seed = 10;
    for (DType dtype : {DType::f32, DType::f16, DType::i32})
      for (const Shape& shape : test_shapes())
        written.emplace_back(std::string("z.") + std::string(dtype_name(dtype)) + "." +
                                 std::to_string(shape.rank()) + shape.str(),
                             make_tensor(shape, dtype, seed++));
    // Not in name order: the header must keep the order given.
    std::shuffle(written.begin(), written.end(), std::mt19937(4));
    written.emplace_back("name with \"quotes\", \\ and \u00fcnic\u00f8de \u2713",
                         make_tensor({2}, DType::f32, 99));
    std::map<std::string, std::string> metadata;
    if (with_metadata)
      metadata = {
          {"format", "pt"}, {"quote\"back\\slash", "line\nbreak\ttab \u00fc\u2713"}, {"empty", ""}};
    const fs::path path = scratch() / (with_metadata ? "rt_meta.safetensors" : "rt.safetensors");
    write_safetensors(path, written, metadata);

    // The header is padded to a multiple of 8 and starts with '{'.
    auto bytes = file_bytes(path);
    ASSERT_GE(bytes.size(), 9u);
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(static_cast<char>(bytes[8]), '{');

    for (auto access : {SafetensorsFile::Access::map, SafetensorsFile::Access::read}) {
      SafetensorsFile f(path, access);
      EXPECT_EQ(f.memory_mapped(), access == SafetensorsFile::Access::map);
      EXPECT_EQ(f.label(), path.string());
      EXPECT_EQ(f.metadata(), metadata);
      ASSERT_EQ(f.entries().size(), written.size());
      uint64_t offset = 0;
      for (size_t i = 0; i < written.size(); ++i) {
        const auto& [name, t] = written[i];
        const SafetensorsEntry& e = f.entries()[i];
        SCOPED_TRACE(name);
        EXPECT_EQ(e.name, name);
        EXPECT_EQ(&f.entry(name), &e);
        EXPECT_EQ(e.dtype, t.dtype() == DType::f32   ? "F32"
                           : t.dtype() == DType::f16 ? "F16"
                                                     : "I32");
        EXPECT_EQ(e.shape, t.shape());
        EXPECT_EQ(e.begin, offset);  // laid out back to back in the given order
        EXPECT_EQ(e.nbytes(), t.nbytes());
        offset = e.end;
        HostTensor r = f.read(name);
        EXPECT_EQ(r.dtype(), t.dtype());
        EXPECT_EQ(r.shape(), t.shape());
        EXPECT_EQ(bytes_of(r), bytes_of(t));
        if (t.dtype() == DType::f32) {  // converted on the way in
          EXPECT_EQ(bytes_of(f.read(name, DType::f16)), bytes_of(t.cast(DType::f16)));
        } else if (t.dtype() == DType::f16) {
          EXPECT_EQ(bytes_of(f.read(name, DType::f32)), bytes_of(t.cast(DType::f32)));
        }
      }
      EXPECT_EQ(offset, bytes.size() - 8 - n);
    }
  }
}

// A rewrite replaces the file: a SafetensorsFile still mapping the old one keeps its bytes
// (truncating a mapped file in place would make its next read a SIGBUS).
TEST(Safetensors, RewritingAMappedFileLeavesTheMappingIntact) {
  const fs::path path = scratch() / "rewrite.safetensors";
  std::vector<std::pair<std::string, HostTensor>> v1, v2;
  v1.emplace_back("w", make_tensor({64, 64}, DType::f32, 1));
  v2.emplace_back("x", make_tensor({2}, DType::f16, 2));
  write_safetensors(path, v1);
  SafetensorsFile old(path);
  ASSERT_TRUE(old.memory_mapped());
  write_safetensors(path, v2);
  EXPECT_EQ(bytes_of(old.read("w")), bytes_of(v1[0].second));
  SafetensorsFile now(path);
  ASSERT_EQ(now.entries().size(), 1u);
  EXPECT_EQ(bytes_of(now.read("x")), bytes_of(v2[0].second));
}

TEST(Safetensors, EmptyFileHasNoEntries) {
  const fs::path path = scratch() / "empty.safetensors";
  write_safetensors(path, {});
  SafetensorsFile f(path);
  EXPECT_TRUE(f.entries().empty());
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(file_bytes(path).size(), 16u);  // "{}" padded to 8
  EXPECT_FALSE(f.contains("x"));
}

// BF16 (and the other dtypes vkformer does not write) from hand-made bytes and known values.
TEST(Safetensors, ReadsBf16AndIntegerDtypesFromKnownBytes) {
  // bf16 bit patterns and the floats they are, written out independently of half.cpp.
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc020, 0x4049, 0x0000, 0x8000,
                                      0x7f80, 0xff80, 0x7fc0, 0x0001, 0x3a83};
  const std::vector<float> expect = {1.0f,
                                     -2.5f,
                                     3.140625f,
                                     0.0f,
                                     -0.0f,
                                     INFINITY,
                                     -INFINITY,
                                     NAN,
                                     std::ldexp(1.0f, -133),
                                     std::ldexp(131.0f, -17)};
  std::string data;
  for (uint16_t b : bf16) data.append(reinterpret_cast<const char*>(&b), 2);
  const size_t bf_end = data.size();
  data += raw<double>({0.1, -1e300, 3.0});                // F64
  data += raw<int64_t>({-5, 2147483647, -2147483648LL});  // I64
  data += raw<uint8_t>({0, 1, 0, 1, 1});                  // BOOL
  data += raw<int8_t>({-128, 127});                       // I8
  data += raw<uint16_t>({65535, 7});                      // U16
  data += raw<uint64_t>({1, 4000000000ULL});              // U64
  std::string header =
      "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,5],\"data_offsets\":[0,20]},"
      "\"d\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[20,44]},"
      "\"i\":{\"dtype\":\"I64\",\"shape\":[3,1],\"data_offsets\":[44,68]},"
      "\"m\":{\"dtype\":\"BOOL\",\"shape\":[5],\"data_offsets\":[68,73]},"
      "\"s\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[73,75]},"
      "\"u\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[75,79]},"
      "\"big\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[79,95]},"
      "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[95,96]}}";
  data += '\x38';  // one F8_E4M3 byte
  ASSERT_EQ(bf_end, 20u);
  const fs::path path = scratch() / "bf16.safetensors";
  write_file(path, make_st(header, data));
  SafetensorsFile f(path);

  HostTensor w = f.read("w");
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(w.shape(), (Shape{2, 5}));
  HostTensor w16 = f.read("w", DType::f16);
  for (size_t i = 0; i < expect.size(); ++i) {
    float got = w.f32_at(static_cast<int64_t>(i));
    if (std::isnan(expect[i])) {
      EXPECT_TRUE(std::isnan(got)) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expect[i])) << i;
    }
    uint16_t h;
    std::memcpy(&h, w16.data() + 2 * i, 2);
    if (!std::isnan(expect[i])) EXPECT_EQ(h, float_to_half(expect[i])) << i;
  }

  HostTensor d = f.read("d");
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_EQ(d.to_f32(), (std::vector<float>{0.1f, -INFINITY, 3.0f}));
  EXPECT_EQ(f.read("i").to_i32(), (std::vector<int32_t>{-5, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(f.read("i").shape(), (Shape{3, 1}));
  EXPECT_EQ(f.read("m").to_i32(), (std::vector<int32_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(f.read("s").to_i32(), (std::vector<int32_t>{-128, 127}));
  EXPECT_EQ(f.read("u", DType::i32).to_i32(), (std::vector<int32_t>{65535, 7}));
  EXPECT_TRUE(fails_with([&] { f.read("big"); }, ErrorCode::format,
                         "value 4000000000 at index [1] does not fit in int32"));
  EXPECT_EQ(f.entry("f8").dtype, "F8_E4M3");  // listed, but not convertible
  EXPECT_TRUE(fails_with([&] { f.read("f8"); }, ErrorCode::format, "cannot convert"));
  EXPECT_TRUE(fails_with([&] { f.read("w", DType::i32); }, ErrorCode::invalid_argument,
                         "read it as f32 or f16"));
  EXPECT_TRUE(
      fails_with([&] { f.read("i", DType::f32); }, ErrorCode::invalid_argument, "read it as i32"));
  EXPECT_TRUE(
      fails_with([&] { f.read("nope"); }, ErrorCode::invalid_argument, "no tensor named 'nope'"));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.bytes(f.entry("m")).size(), 5u);
}

TEST(Safetensors, ReadsEveryGoldenFixture) {
  if (!fs::exists(golden_dir())) GTEST_SKIP() << "no " << golden_dir();
  int files = 0;
  for (const auto& dir : fs::directory_iterator(golden_dir())) {
    const fs::path path = dir.path() / "model.safetensors";
    if (!fs::exists(path)) continue;
    SCOPED_TRACE(path.string());
    ++files;
    const std::string config = read_text(dir.path() / "config.json");
    const std::string dtype = json_string(read_text(dir.path() / "case.json"), "weights_dtype");
    const int64_t d_model = json_int(config, "d_model").value_or(-1);
    const int64_t dff = json_int(config, "dim_feedforward").value_or(-1);

    SafetensorsFile f(path);
    ASSERT_FALSE(f.entries().empty());
    EXPECT_EQ(f.metadata().count("format"), 1u);

    // Independently of the reader: the header length, and so the data buffer, from the bytes.
    const auto bytes = file_bytes(path);
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    const std::byte* data = bytes.data() + 8 + n;

    // make_golden.py writes tensors in name order, back to back, filling the buffer.
    std::vector<const SafetensorsEntry*> sorted;
    for (const auto& e : f.entries()) sorted.push_back(&e);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
    uint64_t offset = 0;
    int checked_shapes = 0;
    for (const SafetensorsEntry* e : sorted) {
      SCOPED_TRACE(e->name);
      EXPECT_EQ(e->dtype, dtype.empty() ? "F32" : dtype);
      EXPECT_EQ(e->begin, offset);
      offset = e->end;
      if (ends_with(e->name, "linear1.weight")) {
        EXPECT_EQ(e->shape, (Shape{dff, d_model}));
        ++checked_shapes;
      } else if (ends_with(e->name, "linear2.weight")) {
        EXPECT_EQ(e->shape, (Shape{d_model, dff}));
        ++checked_shapes;
      } else if (ends_with(e->name, "self_attn.in_proj_weight")) {
        EXPECT_EQ(e->shape, (Shape{3 * d_model, d_model}));
        ++checked_shapes;
      } else if (ends_with(e->name, "norm1.bias")) {
        EXPECT_EQ(e->shape, (Shape{d_model}));
        ++checked_shapes;
      }

      HostTensor t32 = f.read(e->name, DType::f32);
      HostTensor t16 = f.read(e->name, DType::f16);
      ASSERT_EQ(t32.shape(), e->shape);
      const auto numel = static_cast<size_t>(t32.numel());
      const std::byte* src = data + e->begin;
      for (size_t i = 0; i < numel; ++i) {
        const float v = t32.f32_at(static_cast<int64_t>(i));
        ASSERT_TRUE(std::isfinite(v));
        uint16_t h16;
        std::memcpy(&h16, t16.data() + 2 * i, 2);
        if (e->dtype == "F32") {
          float want;
          std::memcpy(&want, src + 4 * i, 4);
          ASSERT_EQ(std::bit_cast<uint32_t>(v), std::bit_cast<uint32_t>(want)) << i;
          ASSERT_EQ(h16, float_to_half(want)) << i;
        } else {
          uint16_t stored;
          std::memcpy(&stored, src + 2 * i, 2);
          if (e->dtype == "F16") {
            ASSERT_EQ(h16, stored) << i;  // no conversion
            ASSERT_EQ(float_to_half(v), stored) << i;
          } else {  // BF16: the upper half of a float
            ASSERT_EQ(std::bit_cast<uint32_t>(v), static_cast<uint32_t>(stored) << 16) << i;
            ASSERT_EQ(h16, float_to_half(v)) << i;
          }
        }
      }
    }
    EXPECT_EQ(offset, bytes.size() - 8 - n);
    EXPECT_GT(checked_shapes, 0);
  }
  EXPECT_GT(files, 0);
}

TEST(Safetensors, WriterRejectsBadNamesAndUnwritablePaths) {
  std::vector<std::pair<std::string, HostTensor>> dup;
  dup.emplace_back("x", make_tensor({2}, DType::f32, 1));
  dup.emplace_back("x", make_tensor({2}, DType::f32, 2));
  const fs::path path = scratch() / "dup.safetensors";
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, dup); }, ErrorCode::invalid_argument,
                         "duplicate tensor name 'x'"));
  EXPECT_FALSE(fs::exists(path));
  std::vector<std::pair<std::string, HostTensor>> reserved;
  reserved.emplace_back("__metadata__", make_tensor({2}, DType::f32, 1));
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, reserved); }, ErrorCode::invalid_argument,
                         "reserved"));
  std::vector<std::pair<std::string, HostTensor>> bad_utf8;
  bad_utf8.emplace_back("\xff", make_tensor({2}, DType::f32, 1));
  EXPECT_TRUE(
      fails_with([&] { write_safetensors(path, bad_utf8); }, ErrorCode::invalid_argument, "UTF-8"));
  std::vector<std::pair<std::string, HostTensor>> hollow;
  hollow.emplace_back("h", HostTensor());
  EXPECT_TRUE(fails_with([&] { write_safetensors(path, hollow); }, ErrorCode::invalid_argument,
                         "tensor 'h': the f32 tensor of shape [] holds 0 bytes, not 4"));
  EXPECT_TRUE(fails_with([&] { write_safetensors(scratch() / "no_dir" / "x.safetensors", {}); },
                         ErrorCode::io, "no_dir"));
  EXPECT_TRUE(
      fails_with([&] { write_safetensors(scratch(), {}); }, ErrorCode::io, scratch().string()));
  // Nothing is left behind by the failed writes.
  for (const auto& entry : fs::directory_iterator(scratch()))
    EXPECT_EQ(entry.path().string().find("tmp-vkformer"), std::string::npos) << entry.path();
}

TEST(Safetensors, OpenErrorsAreIoErrors) {
  const fs::path missing = scratch() / "missing.safetensors";
  EXPECT_TRUE(fails_with([&] { SafetensorsFile f(missing); }, ErrorCode::io,
                         missing.string() + ": cannot open"));
  EXPECT_TRUE(fails_with([&] { SafetensorsFile f(scratch()); }, ErrorCode::io, "directory"));
  const fs::path null_device = vkformer::testing::null_device_path();
  EXPECT_TRUE(fails_with([&] { SafetensorsFile f(null_device); }, ErrorCode::io,
                         null_device.string() + ": is a character device, not a regular file"));
  // No writer: opening must not wait for one.
  const vkformer::testing::WaitingPipe fifo(scratch() / "fifo");
  const std::string not_regular = ": is " + vkformer::testing::fifo_words() + ", not a regular file";
  EXPECT_TRUE(fails_with([&] { SafetensorsFile f(fifo.path()); }, ErrorCode::io,
                         fifo.path().string() + not_regular));
  EXPECT_TRUE(fails_with([&] { read_npy(fifo.path()); }, ErrorCode::io,
                         fifo.path().string() + not_regular));
}

// One header problem per case: the ErrorCode and the words that name it.
TEST(Safetensors, CorruptHeadersNameTheProblem) {
  const std::string data24(24, '\0');
  auto one = [](std::string fields) { return "{\"a\":{" + fields + "}}"; };
  const std::string ok_fields = R"("dtype":"F32","shape":[2,3],"data_offsets":[0,24])";
  ASSERT_NO_THROW(SafetensorsFile::from_bytes(make_st(one(ok_fields), data24)));

  // The file and the header length.
  EXPECT_TRUE(st_fails({}, "too short"));
  EXPECT_TRUE(st_fails(to_bytes("1234567"), "too short"));
  EXPECT_TRUE(st_fails(to_bytes(le64(1000) + "{}"), "header length 1000 is larger than the rest"));
  EXPECT_TRUE(
      st_fails(to_bytes(le64(1ULL << 63) + "{}      "), "header length 9223372036854775808"));
  EXPECT_TRUE(st_fails(to_bytes(le64(~0ULL) + "{}      "), "larger than the rest of the file"));
  EXPECT_TRUE(st_fails(to_bytes(le64(0)), "expected the header to be a JSON object"));
  EXPECT_TRUE(fails_with([] { SafetensorsFile::from_bytes({}, "model.bin"); }, ErrorCode::format,
                         "model.bin:"));

  // Invalid JSON.
  EXPECT_TRUE(st_fails(make_st("[1,2]", ""), "expected the header to be a JSON object"));
  EXPECT_TRUE(st_fails(make_st("{\"a\":{" + ok_fields + "}", data24), "expected ',' or '}'"));
  EXPECT_TRUE(st_fails(make_st("{\"a\" {}}", ""), "expected ':'"));
  EXPECT_TRUE(st_fails(make_st("{} x", ""), "after the header's JSON object"));
  EXPECT_TRUE(
      st_fails(make_st(std::string("{}\0\0\0\0\0\0", 8), ""), "after the header's JSON object"));
  EXPECT_TRUE(st_fails(make_st("{\"a\":{" + ok_fields + "},}", data24), "expected a tensor name"));
  EXPECT_TRUE(st_fails(make_st("{\"a\x01\":{}}", ""), "control character"));
  EXPECT_TRUE(st_fails(make_st("{\"\xff\":{}}", ""), "invalid UTF-8"));
  EXPECT_TRUE(st_fails(make_st("{\"\xc0\x80\":{}}", ""), "invalid UTF-8"));  // overlong NUL
  EXPECT_TRUE(st_fails(make_st("{\"\\q\":{}}", ""), "invalid escape"));
  EXPECT_TRUE(st_fails(make_st("{\"\\ud800\":{}}", ""), "surrogate"));
  EXPECT_TRUE(st_fails(make_st("{\"\\udc00x\":{}}", ""), "surrogate"));
  EXPECT_TRUE(st_fails(make_st("{\"\\u12\":{}}", ""), "hex digits"));
  EXPECT_TRUE(st_fails(make_st("{\"abc", ""), "unterminated string"));
  EXPECT_TRUE(st_fails(to_bytes(le64(6) + "{\"abc\\"), "unterminated string"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + ",\"x\":tru"), data24), "expected a JSON value"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + ",\"x\":-"), data24), "invalid number"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + ",\"x\":1.e5"), data24), "invalid number"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + ",\"x\":" + std::string(100000, '[')), data24),
                       "nested deeper than 64 levels"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + ",\"x\":{\"k\" 1}"), data24), "expected ':'"));
  // Unknown fields with any valid JSON value are skipped.
  EXPECT_NO_THROW(SafetensorsFile::from_bytes(make_st(
      one(ok_fields + R"(,"x":{"k":[1,-2.5e+3,true,false,null,"\u00e9\ud83d\ude00",{}],"y":[]})"),
      data24)));

  // Missing and ill-typed fields.
  EXPECT_TRUE(st_fails(make_st(one(R"("shape":[2,3],"data_offsets":[0,24])"), data24),
                       "tensor 'a' (header byte 5): missing \"dtype\""));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F32","data_offsets":[0,24])"), data24),
                       "missing \"shape\""));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[2,3])"), data24), "missing \"data_offsets\""));
  EXPECT_TRUE(st_fails(make_st("{\"a\":5}", ""), "tensor 'a' (header byte 5): expected an object"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":5,"shape":[2,3],"data_offsets":[0,24])"), data24),
                       "\"dtype\" must be a string"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F32","shape":"x","data_offsets":[0,24])"), data24),
                       "\"shape\" must be an array"));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[2,3.0],"data_offsets":[0,24])"), data24),
               "dimension 1 of the shape of 'a' is not an integer"));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[-2,3],"data_offsets":[0,24])"), data24),
               "dimension 0 of the shape of 'a' is negative"));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[02,3],"data_offsets":[0,24])"), data24),
               "leading zero"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F32","shape":[2,3],"data_offsets":[0])"), data24),
                       "\"data_offsets\" must be an array of two integers"));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,24,48])"), data24),
               "\"data_offsets\" must be an array of two integers"));
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[2,3],"data_offsets":["0",24])"), data24),
               "expected the begin offset of 'a'"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F32","shape":[2,3],"data_offsets":[24,0])"), data24),
                       "begin is after end"));

  // Unknown dtype; size and range mismatches; overlaps.
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F33","shape":[2,3],"data_offsets":[0,24])"), data24),
                       "unknown dtype 'F33'"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,20])"), data24),
                       "shape [2,3] of F32 needs 24 bytes but data_offsets [0, 20] span 20"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F16","shape":[2,3],"data_offsets":[0,24])"), data24),
                       "needs 12 bytes"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields), std::string(20, '\0')),
                       "data_offsets [0, 24] reach beyond the data buffer of 20 bytes"));
  EXPECT_TRUE(st_fails(
      make_st(one(R"("dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104])"),
              data24),
      "reach beyond the data buffer"));
  EXPECT_TRUE(st_fails(make_st(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                               data24),
                       "tensors 'a' (bytes 0..16) and 'b' (bytes 8..24) overlap"));
  EXPECT_TRUE(st_fails(make_st(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                               R"("a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})",
                               data24),
                       "overlap"));
  // Gaps are not allowed, as in the reference implementation (safetensors_strict_test.cpp).
  EXPECT_TRUE(st_fails(make_st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                               data24),
                       "bytes 8..16 of the data buffer belong to no tensor"));

  // Rank, duplicates, absurd dims.
  EXPECT_TRUE(
      st_fails(make_st(one(R"("dtype":"F32","shape":[1,2,1,3,1],"data_offsets":[0,24])"), data24),
               "\"shape\" has more than 4 dimensions"));
  EXPECT_TRUE(st_fails(make_st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                               data24),
                       "duplicate tensor name 'a'"));
  EXPECT_TRUE(
      st_fails(make_st(one(ok_fields + R"(,"dtype":"F32")"), data24), "duplicate field 'dtype'"));
  EXPECT_TRUE(st_fails(make_st(one(ok_fields + R"(,"x":1,"x":2)"), data24), "duplicate field 'x'"));
  EXPECT_TRUE(st_fails(
      make_st(one(R"("dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,24])"),
              data24),
      "has more elements than fit in 63 bits"));
  EXPECT_TRUE(st_fails(
      make_st(one(R"("dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,24])"), data24),
      "more elements than fit"));
  EXPECT_TRUE(st_fails(
      make_st(one(R"("dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,24])"), data24),
      "too large for 64 bits"));
  EXPECT_TRUE(st_fails(
      make_st(one(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,24])"), data24),
      "larger than 2^64 bits"));
  EXPECT_TRUE(st_fails(make_st(one(R"("dtype":"F4","shape":[3],"data_offsets":[0,2])"), data24),
                       "not a whole number of bytes"));

  // Metadata.
  EXPECT_TRUE(st_fails(make_st(R"({"__metadata__":{"k":1}})", ""),
                       "the metadata value of 'k' must be a string"));
  EXPECT_TRUE(
      st_fails(make_st(R"({"__metadata__":["k"]})", ""), "'__metadata__' must be an object"));
  EXPECT_TRUE(
      st_fails(make_st(R"({"__metadata__":{"k":"1","k":"2"}})", ""), "duplicate metadata key"));
  EXPECT_TRUE(st_fails(make_st(R"({"__metadata__":{},"__metadata__":{}})", ""),
                       "duplicate key '__metadata__'"));
  auto nullmeta = SafetensorsFile::from_bytes(make_st(R"({"__metadata__":null})", ""));
  EXPECT_TRUE(nullmeta.metadata().empty());
}

TEST(Safetensors, EveryTruncationIsAnError) {
  const auto full = small_safetensors();
  ASSERT_NO_THROW(SafetensorsFile::from_bytes(full));
  const fs::path path = scratch() / "truncated.safetensors";
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE(len);
    std::vector<std::byte> part(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_TRUE(fails_with([&] { SafetensorsFile::from_bytes(part); }, ErrorCode::format, ""));
    write_file(path, part);
    EXPECT_TRUE(fails_with([&] { SafetensorsFile f(path); }, ErrorCode::format, path.string()));
  }
}

// ------------------------------------------------------------------------------- npy

TEST(Npy, RoundTripsEveryTypeAndRank) {
  struct Case {
    DType dtype;
    NpyType type;
    DType read_as;
    const char* descr;
  };
  const Case cases[] = {
      {DType::f32, NpyType::automatic, DType::f32, "<f4"},
      {DType::f32, NpyType::float32, DType::f32, "<f4"},
      {DType::f32, NpyType::float16, DType::f16, "<f2"},
      {DType::f16, NpyType::automatic, DType::f16, "<f2"},
      {DType::f16, NpyType::float32, DType::f32, "<f4"},
      {DType::i32, NpyType::automatic, DType::i32, "<i8"},
      {DType::i32, NpyType::int64, DType::i32, "<i8"},
      {DType::i32, NpyType::int32, DType::i32, "<i4"},
      {DType::i32, NpyType::boolean, DType::i32, "|b1"},
  };
  uint32_t seed = 50;
  for (const Case& c : cases) {
    for (const Shape& shape : test_shapes()) {
      SCOPED_TRACE(std::string(c.descr) + " from " + std::string(dtype_name(c.dtype)) + " " +
                   shape.str());
      HostTensor t = make_tensor(shape, c.dtype, seed++);
      const fs::path path = scratch() / "rt.npy";
      write_npy(path, t, c.type);

      // NumPy's layout: the data starts at a multiple of 64, the header ends in '\n'.
      const auto bytes = file_bytes(path);
      ASSERT_GE(bytes.size(), 10u);
      const size_t hlen = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
      EXPECT_EQ((10 + hlen) % 64, 0u);
      EXPECT_EQ(static_cast<char>(bytes[9 + hlen]), '\n');
      const std::string header(reinterpret_cast<const char*>(bytes.data()) + 10, hlen);
      EXPECT_NE(header.find(std::string("'descr': '") + c.descr + "'"), std::string::npos)
          << header;

      HostTensor r = read_npy(path);
      EXPECT_EQ(r.shape(), t.shape());
      ASSERT_EQ(r.dtype(), c.read_as);
      if (c.type == NpyType::boolean) {
        auto in = t.to_i32(), out = r.to_i32();
        for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i] != 0 ? 1 : 0) << i;
      } else if (c.read_as != c.dtype) {
        EXPECT_EQ(bytes_of(r), bytes_of(t.cast(c.read_as)));
      } else {
        EXPECT_EQ(bytes_of(r), bytes_of(t));
      }
      EXPECT_EQ(bytes_of(parse_npy(bytes, "mem")), bytes_of(r));
    }
  }
}

// The header bytes np.save (NumPy 1.24) writes for the same arrays.
TEST(Npy, WritesNumpysExactHeader) {
  struct Case {
    HostTensor t;
    NpyType type;
    std::string dict;
  };
  const Case cases[] = {
      {HostTensor({2, 3}, DType::f32), NpyType::automatic,
       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
      {HostTensor(Shape{}, DType::f16), NpyType::automatic,
       "{'descr': '<f2', 'fortran_order': False, 'shape': (), }"},
      {HostTensor({5}, DType::i32), NpyType::automatic,
       "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"},
      {HostTensor({1, 2, 3, 4}, DType::i32), NpyType::boolean,
       "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 2, 3, 4), }"},
      {HostTensor({0}, DType::f32), NpyType::automatic,
       "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }"},
      {HostTensor({100, 2}, DType::i32), NpyType::int32,
       "{'descr': '<i4', 'fortran_order': False, 'shape': (100, 2), }"},
      {HostTensor({2, 0, 3}, DType::f32), NpyType::automatic,
       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0, 3), }"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    const fs::path path = scratch() / "numpy.npy";
    write_npy(path, c.t, c.type);
    const auto bytes = file_bytes(path);
    // Every one of these is 128 header bytes in NumPy: magic, version, length 118, dict, spaces.
    std::string want = std::string("\x93NUMPY\x01\x00", 8) + "\x76" + std::string(1, '\0') +
                       c.dict + std::string(117 - c.dict.size(), ' ') + "\n";
    ASSERT_GE(bytes.size(), 128u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 128), want);
    const size_t elem = c.type == NpyType::boolean  ? 1
                        : c.type == NpyType::int32  ? 4
                        : c.t.dtype() == DType::i32 ? 8
                                                    : dtype_size(c.t.dtype());
    EXPECT_EQ(bytes.size(), 128 + static_cast<size_t>(c.t.numel()) * elem);
  }
}

TEST(Npy, ReadsVersionsAndLiteralVariants) {
  const std::string f = raw<float>({1.5f, -2.0f});
  for (int version : {1, 2, 3}) {
    HostTensor t = parse_npy(
        make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f, version));
    EXPECT_EQ(t.to_f32(), (std::vector<float>{1.5f, -2.0f})) << version;
  }
  // Key order, double quotes, Python 2 longs, no trailing comma, '|' and '=' byte orders.
  HostTensor t =
      parse_npy(make_npy(R"({"shape": (1L, 2L), "fortran_order": False, "descr": "=f4"})", f));
  EXPECT_EQ(t.shape(), (Shape{1, 2}));
  EXPECT_EQ(parse_npy(make_npy("{'descr':'|u1','fortran_order':False,'shape':(3,)}",
                               std::string("\x01\xff\x00", 3)))
                .to_i32(),
            (std::vector<int32_t>{1, 255, 0}));
  // A 0-d array is a scalar; fortran order is the same layout at rank 1; big-endian single bytes.
  HostTensor s = parse_npy(
      make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", raw<double>({0.25})));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_EQ(s.to_f32(), std::vector<float>{0.25f});
  EXPECT_EQ(parse_npy(make_npy("{'descr': '<i2', 'fortran_order': True, 'shape': (2,), }",
                               raw<int16_t>({-7, 300})))
                .to_i32(),
            (std::vector<int32_t>{-7, 300}));
  EXPECT_EQ(parse_npy(make_npy("{'descr': '>i1', 'fortran_order': False, 'shape': (1,), }", "\xfe"))
                .to_i32(),
            std::vector<int32_t>{-2});
  EXPECT_EQ(parse_npy(make_npy("{'descr': '<u4', 'fortran_order': False, 'shape': (2,1), }",
                               raw<uint32_t>({7, 2147483647})))
                .to_i32(),
            (std::vector<int32_t>{7, 2147483647}));
  HostTensor empty =
      parse_npy(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", ""));
  EXPECT_EQ(empty.shape(), (Shape{3, 0}));
  EXPECT_EQ(empty.nbytes(), 0u);
}

TEST(Npy, CorruptFilesNameTheProblem) {
  auto dict = [](std::string_view descr, std::string_view fortran, std::string_view shape) {
    return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
           ", 'shape': " + std::string(shape) + ", }";
  };
  const std::string f6 = raw<float>({1, 2, 3, 4, 5, 6});
  ASSERT_NO_THROW(parse_npy(make_npy(dict("<f4", "False", "(2, 3)"), f6)));

  // Preamble.
  EXPECT_TRUE(npy_fails({}, "not a .npy file"));
  EXPECT_TRUE(npy_fails(to_bytes("PK\x03\x04 zip file"), "not a .npy file"));
  EXPECT_TRUE(npy_fails(to_bytes("\x93NUMPY\x01"), "truncated in the format version"));
  EXPECT_TRUE(npy_fails(to_bytes(std::string("\x93NUMPY\x01\x00\x10", 9)),
                        "truncated in the header length"));
  EXPECT_TRUE(npy_fails(to_bytes(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11)),
                        "truncated in the header length"));
  auto v4 = make_npy(dict("<f4", "False", "(2, 3)"), f6);
  v4[6] = std::byte{4};
  EXPECT_TRUE(npy_fails(v4, "format version 4.0 is not supported"));
  v4[6] = std::byte{1};
  v4[7] = std::byte{1};
  EXPECT_TRUE(npy_fails(v4, "format version 1.1"));
  EXPECT_TRUE(npy_fails(to_bytes(std::string("\x93NUMPY\x01\x00\xff\xff{}", 12)),
                        "header length 65535 is larger than the rest of the file (2 bytes)"));
  EXPECT_TRUE(npy_fails(to_bytes(std::string("\x93NUMPY\x03\x00\xff\xff\xff\xff{}", 14)),
                        "header length 4294967295"));

  // The header dictionary.
  EXPECT_TRUE(npy_fails(make_npy("['descr']", f6), "expected '{'"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", f6),
                        "expected ',' or '}'"));
  EXPECT_TRUE(
      npy_fails(make_npy(dict("<f4", "False", "(2, 3)") + " x", f6), "after the dictionary"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }", f6),
                        "expected ':' after the key 'descr'"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4", f6), "unterminated string"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4', 'shape': (2, 3), }", f6),
                        "the header has no 'fortran_order'"));
  EXPECT_TRUE(npy_fails(make_npy("{'fortran_order': False, 'shape': (2, 3), }", f6),
                        "the header has no 'descr'"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4', 'fortran_order': False}", f6),
                        "the header has no 'shape'"));
  EXPECT_TRUE(
      npy_fails(make_npy(dict("<f4", "False", "(2, 3)") + "}", f6), "after the dictionary"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                                 "'shape': (2, 3), }",
                                 f6),
                        "duplicate key 'descr'"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
                                 "'extra': 1, }",
                                 f6),
                        "unexpected key 'extra'"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "false", "(2, 3)"), f6), "True or False"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "[2, 3]"), f6), "'shape' must be a tuple"));
  EXPECT_TRUE(npy_fails(make_npy("{'descr': 5, 'fortran_order': False, 'shape': (2, 3), }", f6),
                        "expected the 'descr' string"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(2, x)"), f6), "expected a dimension"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(2 3)"), f6), "expected ',' or ')'"));

  // Types.
  EXPECT_TRUE(npy_fails(make_npy(dict(">f4", "False", "(2, 3)"), f6), "is big-endian"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<c8", "False", "(2, 3)"), f6), "'<c8' is not supported"));
  EXPECT_TRUE(npy_fails(make_npy(dict("|O", "False", "(2, 3)"), f6), "'|O' is not supported"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<U5", "False", "(2, 3)"), f6), "not supported"));
  EXPECT_TRUE(npy_fails(make_npy(dict("f4", "False", "(2, 3)"), f6), "no byte order"));
  EXPECT_TRUE(npy_fails(make_npy(dict("", "False", "(2, 3)"), f6), "not a NumPy type string"));
  EXPECT_TRUE(
      npy_fails(make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f6),
                "structured dtypes"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "True", "(2, 3)"), f6), "fortran_order True"));

  // Shapes and sizes.
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(1, 1, 2, 1, 3)"), f6),
                        "'shape' has more than 4 dimensions"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(-2, 3)"), f6), "negative dimension"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(99999999999999999999,)"), f6),
                        "dimension 0 of 'shape' is too large"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(4294967296, 4294967296, 4)"), f6),
                        "more elements than fit in 63 bits"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f8", "False", "(4611686018427387904,)"), f6),
                        "larger than 2^64 bytes"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(1099511627776,)"), f6),
                        "truncated: shape (1099511627776,) of <f4 needs 4398046511104 bytes of "
                        "data, the file has 24"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(2, 3)"), f6.substr(0, 23)),
                        "truncated: shape (2, 3) of <f4 needs 24 bytes of data, the file has 23"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "(2, 2)"), f6), "8 trailing bytes"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<f4", "False", "()"), f6), "20 trailing bytes"));

  // Values that do not fit int32 name their index.
  EXPECT_TRUE(
      npy_fails(make_npy(dict("<i8", "False", "(2, 2)"), raw<int64_t>({0, 1, 2147483648LL, 3})),
                "value 2147483648 at index [1,0] does not fit in int32"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<i8", "False", "(2,)"), raw<int64_t>({-2147483649LL, 0})),
                        "value -2147483649 at index [0]"));
  EXPECT_TRUE(npy_fails(make_npy(dict("<u8", "False", "()"), raw<uint64_t>({1ULL << 63})),
                        "value 9223372036854775808 at index []"));
}

TEST(Npy, WriterErrors) {
  const fs::path path = scratch() / "w.npy";
  EXPECT_TRUE(fails_with([&] { write_npy(path, make_tensor({2}, DType::f32, 1), NpyType::int64); },
                         ErrorCode::invalid_argument,
                         "f32 tensor cannot be written as an integer"));
  EXPECT_TRUE(
      fails_with([&] { write_npy(path, make_tensor({2}, DType::i32, 1), NpyType::float16); },
                 ErrorCode::invalid_argument, "i32 tensor cannot be written as a float"));
  EXPECT_TRUE(fails_with([&] { write_npy(path, HostTensor()); }, ErrorCode::invalid_argument,
                         "holds 0 bytes"));
  EXPECT_TRUE(
      fails_with([&] { write_npy(scratch() / "no_dir" / "x.npy", HostTensor({2}, DType::f32)); },
                 ErrorCode::io, "cannot open"));
  EXPECT_TRUE(
      fails_with([&] { read_npy(scratch() / "missing.npy"); }, ErrorCode::io, "missing.npy"));
  EXPECT_TRUE(fails_with([&] { read_npy(scratch()); }, ErrorCode::io, "directory"));
}

// The golden inputs, masks and outputs, against a minimal independent reading of the bytes.
TEST(Npy, ReadsEveryGoldenFixture) {
  if (!fs::exists(golden_dir())) GTEST_SKIP() << "no " << golden_dir();
  int files = 0, bool_files = 0, int_files = 0;
  for (const auto& dir : fs::directory_iterator(golden_dir())) {
    if (!dir.is_directory()) continue;
    const std::string config = read_text(dir.path() / "config.json");
    const int64_t d_model = json_int(config, "d_model").value_or(-1);
    const int64_t vocab = std::max(json_int(config, "src_vocab").value_or(0),
                                   json_int(config, "tgt_vocab").value_or(0));
    for (const auto& file : fs::directory_iterator(dir.path())) {
      if (file.path().extension() != ".npy") continue;
      SCOPED_TRACE(file.path().string());
      ++files;
      const HostTensor t = read_npy(file.path());
      const std::string name = file.path().stem().string();

      // Version 1.0: u16 header length, a dict with descr and shape, then the data.
      const auto bytes = file_bytes(file.path());
      ASSERT_GE(bytes.size(), 10u);
      ASSERT_EQ(static_cast<int>(bytes[6]), 1);
      const size_t hlen = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
      const std::string header(reinterpret_cast<const char*>(bytes.data()) + 10, hlen);
      std::smatch m;
      ASSERT_TRUE(std::regex_search(header, m, std::regex("'descr': '([<|][a-z][0-9])'")));
      const std::string descr = m[1];
      ASSERT_TRUE(std::regex_search(header, m, std::regex("'shape': \\(([0-9, ]*)\\)")));
      std::vector<int64_t> dims;
      std::string dims_text = m[1];
      const std::regex number("[0-9]+");
      for (std::sregex_iterator it(dims_text.begin(), dims_text.end(), number), end; it != end;
           ++it)
        dims.push_back(std::stoll(it->str()));
      EXPECT_EQ(t.shape(), Shape(dims));
      const std::byte* data = bytes.data() + 10 + hlen;
      const auto n = static_cast<size_t>(t.numel());

      if (descr == "<f4") {
        ASSERT_EQ(t.dtype(), DType::f32);
        ASSERT_EQ(bytes.size(), 10 + hlen + 4 * n);
        EXPECT_EQ(0, std::memcmp(t.data(), data, 4 * n));
        for (size_t i = 0; i < n; ++i) {
          float v = t.f32_at(static_cast<int64_t>(i));
          // Float masks hold 0 and -inf; everything else is finite.
          ASSERT_TRUE(std::isfinite(v) || (ends_with(name, "_mask") && v == -INFINITY)) << i;
        }
        if (name == "src" || name == "tgt" || name == "memory") {
          ASSERT_EQ(t.shape().rank(), 3);
          EXPECT_EQ(t.shape()[2], d_model);
        }
        if (ends_with(name, "_mask")) EXPECT_EQ(t.shape().rank(), 2);
      } else if (descr == "|b1") {
        ++bool_files;
        ASSERT_EQ(t.dtype(), DType::i32);
        ASSERT_EQ(bytes.size(), 10 + hlen + n);
        auto v = t.to_i32();
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(v[i] == 0 || v[i] == 1) << i;
          EXPECT_EQ(v[i], static_cast<int32_t>(data[i])) << i;
        }
        EXPECT_EQ(t.shape().rank(), 2);  // [batch, length]
      } else if (descr == "<i8") {
        ++int_files;
        ASSERT_EQ(t.dtype(), DType::i32);
        ASSERT_EQ(bytes.size(), 10 + hlen + 8 * n);
        auto v = t.to_i32();
        for (size_t i = 0; i < n; ++i) {
          int64_t want;
          std::memcpy(&want, data + 8 * i, 8);
          EXPECT_EQ(v[i], want) << i;
          if (vocab > 0) EXPECT_LT(v[i], vocab) << i;
          EXPECT_GE(v[i], 0) << i;
        }
      } else {
        ADD_FAILURE() << "unexpected descr " << descr;
      }
    }
  }
  EXPECT_GT(files, 0);
  EXPECT_GT(bool_files, 0);
  (void)int_files;  // only the seq2seq fixture has token ids
}

TEST(Npy, EveryTruncationIsAnError) {
  const auto full = small_npy();
  ASSERT_NO_THROW(parse_npy(full));
  const fs::path path = scratch() / "truncated.npy";
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE(len);
    std::vector<std::byte> part(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_TRUE(fails_with([&] { parse_npy(part); }, ErrorCode::format, ""));
    write_file(path, part);
    EXPECT_TRUE(fails_with([&] { read_npy(path); }, ErrorCode::format, path.string()));
  }
}

// ------------------------------------------------------------------------------- mutations

// Random corruption of small valid files: every outcome must be a tensor or a vkformer::Error.
// Mutations favour the header, where the parsing is; ASan/UBSan builds check the reads too.
// No mutation may make a reader slow (a size taken at its word, a loop over a bogus count): the
// 4000 reads may use at most 2 s of CPU: 0.04 s (safetensors) and 0.02 s (npy) here, printed.
// The bound is on the thread's CPU time, not the clock's (2 s before): the clock's grows with the
// machine's load while the thread waits for a core (0.05-0.25 s at load 11), the CPU time not.
template <class Try>
void mutate_many(const std::vector<std::byte>& valid, size_t header_end, uint32_t seed, int rounds,
                 Try&& attempt) {
  std::mt19937 rng(seed);
  const char interesting[] = "{}[]():,\"'\\-0159eE.LTFn \n\x7f\x80\xff";
  int ok = 0, errors = 0;
  const double cpu0 = testing::thread_cpu_seconds();
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::byte> b = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !b.empty(); ++k) {
      const size_t limit = rng() % 5 == 0 ? b.size() : std::min(header_end, b.size());
      const size_t at = rng() % limit;
      switch (rng() % 6) {
        case 0: b[at] ^= static_cast<std::byte>(1u << (rng() % 8)); break;
        case 1: b[at] = static_cast<std::byte>(rng()); break;
        case 2:
          b[at] = static_cast<std::byte>(interesting[rng() % (sizeof(interesting) - 1)]);
          break;
        case 3: b.resize(rng() % (b.size() + 1)); break;
        case 4: b.erase(b.begin() + static_cast<ptrdiff_t>(at)); break;
        case 5:
          b.insert(b.begin() + static_cast<ptrdiff_t>(at),
                   static_cast<std::byte>(interesting[rng() % (sizeof(interesting) - 1)]));
          break;
      }
    }
    try {
      attempt(b);
      ++ok;
    } catch (const Error&) {
      ++errors;
    }
  }
  const double cpu = testing::thread_cpu_seconds() - cpu0;
  EXPECT_GT(ok, 0);
  EXPECT_GT(errors, rounds / 2);
  std::printf("%d mutated files read in %.3f s of CPU time\n", rounds, cpu);
  EXPECT_LT(cpu, 2.0) << "seconds of CPU time for " << rounds << " mutated files";
}

TEST(Mutations, SafetensorsNeverCrash) {
  const auto valid = small_safetensors();
  uint64_t n;
  std::memcpy(&n, valid.data(), 8);
  mutate_many(valid, 8 + n, 7, 4000, [](const std::vector<std::byte>& b) {
    SafetensorsFile f = SafetensorsFile::from_bytes(b);
    for (const auto& e : f.entries()) {
      try {
        f.read(e.name);
      } catch (const Error& err) {
        // A mutated I64/U8 value may not fit, a mutated dtype may not convert: format errors.
        EXPECT_EQ(err.code(), ErrorCode::format) << err.what();
      }
    }
  });
}

TEST(Mutations, NpyNeverCrash) {
  const auto valid = small_npy();
  mutate_many(valid, 128, 8, 4000, [](const std::vector<std::byte>& b) { parse_npy(b); });
}

}  // namespace
}  // namespace vkformer
