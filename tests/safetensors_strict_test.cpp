// The data buffer of a safetensors file must be covered exactly by its tensors, as the reference
// implementation (Hugging Face safetensors) requires: no trailing bytes ("metadata incomplete
// buffer"), no gap and no overlap between tensors, zero-size tensors included ("invalid offset").
// No device is needed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer {
namespace {

namespace fs = std::filesystem;
using testing::fails_with;

std::vector<std::byte> to_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A safetensors file: the header (padded with spaces to a multiple of 8), then `data`.
std::vector<std::byte> make_st(std::string header, std::string_view data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  return to_bytes(len + header + std::string(data));
}

// A header entry: "name":{"dtype":"U8","shape":[end-begin],"data_offsets":[begin,end]}.
std::string u8(const std::string& name, int begin, int end) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) +
         "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

::testing::AssertionResult rejects(const std::vector<std::byte>& bytes, std::string_view needle) {
  return fails_with([&] { SafetensorsFile::from_bytes(bytes, "strict.safetensors"); },
                    ErrorCode::format, needle);
}

const std::string kEightBytes(8, '\x01');

TEST(SafetensorsStrict, TrailingBytesAfterTheLastTensorAreRejected) {
  // Loaded before: the reference rejects it ("MetadataIncompleteBuffer").
  const auto bytes = make_st("{" + u8("a", 0, 4) + "," + u8("b", 4, 6) + "}", kEightBytes);
  EXPECT_TRUE(rejects(bytes, "strict.safetensors: the data buffer has 8 bytes but its tensors "
                             "cover 6: 2 trailing bytes after the last tensor"));
  // One byte is enough, and a file without tensors has no data buffer at all.
  EXPECT_TRUE(rejects(make_st("{" + u8("a", 0, 7) + "}", kEightBytes), "1 trailing bytes"));
  EXPECT_TRUE(rejects(make_st("{}", "x"), "has 1 bytes but its tensors cover 0"));
  EXPECT_TRUE(rejects(make_st(R"({"__metadata__":{"k":"v"}})", "xyz"), "3 trailing bytes"));
}

TEST(SafetensorsStrict, TheErrorNamesTheFileOnDisk) {
  const fs::path path =
      fs::temp_directory_path() / ("vkformer_strict_" + std::to_string(vkformer::testing::process_id()) + ".safetensors");
  {
    const auto bytes = make_st("{" + u8("a", 0, 4) + "}", kEightBytes);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  for (auto access : {SafetensorsFile::Access::map, SafetensorsFile::Access::read})
    EXPECT_TRUE(fails_with([&] { SafetensorsFile file(path, access); }, ErrorCode::format,
                           path.string() + ": the data buffer has 8 bytes but its tensors cover 4"));
  fs::remove(path);
}

TEST(SafetensorsStrict, GapsBetweenTensorsAreRejected) {
  EXPECT_TRUE(rejects(make_st("{" + u8("a", 0, 2) + "," + u8("b", 5, 8) + "}", kEightBytes),
                      "bytes 2..5 of the data buffer belong to no tensor (a gap before 'b' "
                      "(bytes 5..8))"));
  // Before the first tensor too.
  EXPECT_TRUE(rejects(make_st("{" + u8("a", 1, 8) + "}", kEightBytes), "bytes 0..1"));
}

TEST(SafetensorsStrict, OverlapsAreRejectedZeroSizeTensorsIncluded) {
  EXPECT_TRUE(rejects(make_st("{" + u8("a", 0, 5) + "," + u8("b", 4, 8) + "}", kEightBytes),
                      "tensors 'a' (bytes 0..5) and 'b' (bytes 4..8) overlap"));
  // A zero-size tensor must sit where the tensors before it end, not inside one.
  EXPECT_TRUE(rejects(make_st("{" + u8("a", 0, 8) + "," + u8("z", 3, 3) + "}", kEightBytes),
                      "tensors 'a' (bytes 0..8) and 'z' (bytes 3..3) overlap"));
}

TEST(SafetensorsStrict, ExactCoverageLoadsInAnyHeaderOrder) {
  // Tensors listed out of offset order, zero-size ones at the start, between and at the end.
  const auto bytes = make_st("{" + u8("c", 6, 8) + "," + u8("z0", 0, 0) + "," + u8("a", 0, 4) +
                                 "," + u8("z4", 4, 4) + "," + u8("b", 4, 6) + "," + u8("z8", 8, 8) +
                                 "}",
                             kEightBytes);
  SafetensorsFile file = SafetensorsFile::from_bytes(bytes);
  EXPECT_EQ(file.entries().size(), 6u);
  EXPECT_EQ(file.bytes(file.entry("c")).size(), 2u);
  EXPECT_NO_THROW(SafetensorsFile::from_bytes(make_st("{}", "")));
}

TEST(SafetensorsStrict, WhatTheWriterWritesIsExact) {
  const fs::path path =
      fs::temp_directory_path() / ("vkformer_strict_w_" + std::to_string(vkformer::testing::process_id()) + ".safetensors");
  std::vector<std::pair<std::string, HostTensor>> tensors;
  tensors.emplace_back("w", HostTensor(Shape{3, 5}, DType::f32));
  tensors.emplace_back("empty", HostTensor(Shape{0, 7}, DType::f16));
  tensors.emplace_back("h", HostTensor(Shape{3}, DType::f16));
  tensors.emplace_back("ids", HostTensor(Shape{2, 1}, DType::i32));
  write_safetensors(path, tensors, {{"format", "pt"}});
  SafetensorsFile file(path, SafetensorsFile::Access::read);
  EXPECT_EQ(file.entries().size(), tensors.size());
  fs::remove(path);
}

}  // namespace
}  // namespace vkformer
