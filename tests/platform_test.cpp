// The platform layer (src/platform) as the library uses it: files under non-ASCII paths (UTF-8 on
// every platform; wide-character APIs on Windows) are mapped, read, written and replaced, and a
// whole model directory under one loads and generates what PyTorch generated.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/io.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kGolden = VKF_GOLDEN_DIR;
const fs::path kGoldenGguf = VKF_GGUF_DIR;

// <scratch>/modèles/测试: Latin-1 and CJK, so neither an ANSI code page nor a byte-per-character
// conversion can spell it.
fs::path non_ascii_dir() {
  const fs::path dir = scratch_dir("platform") / fs::path(u8"modèles") / fs::path(u8"测试");
  fs::create_directories(dir);
  return dir;
}

std::string utf8(const fs::path& p) {
  const std::u8string s = p.u8string();
  return std::string(s.begin(), s.end());
}

std::vector<char> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

class Platform : public DeviceTest {};

TEST_F(Platform, AModelDirectoryUnderANonAsciiPathLoadsAndGenerates) {
  const fs::path dir = non_ascii_dir() / "seq2seq_small";
  fs::create_directories(dir);
  for (const char* name : {"config.json", "model.safetensors", "case.json"})
    fs::copy_file(kGolden / "seq2seq_small" / name, dir / name,
                  fs::copy_options::overwrite_existing);
  // Model::load takes the directory as UTF-8 text, as the C API and the tool pass it.
  Model model = Model::load(device(), utf8(dir));
  const json meta = json::parse(file_bytes(dir / "case.json"));
  const json& d = meta["decoding"];
  GenerateOptions o;
  o.max_new_tokens = d["steps"];
  o.bos = d["bos"];
  o.eos = -1;
  // One source is enough here (model_test decodes them all): the weights came from the new path.
  ASSERT_FALSE(d["results"].empty());
  const json& r = d["results"][0];
  EXPECT_EQ(model.generate(r["src"].get<std::vector<int32_t>>(), o),
            r["greedy"].get<std::vector<int32_t>>())
      << "greedy decoding of " << r["src"].dump() << " (PyTorch's tokens)";
}

TEST_F(Platform, FilesUnderANonAsciiPathAreMappedAndRead) {
  const fs::path npy = non_ascii_dir() / fs::path(u8"expected_é.npy");
  fs::copy_file(kGolden / "seq2seq_small" / "expected.npy", npy,
                fs::copy_options::overwrite_existing);
  const HostTensor here = read_npy(npy);
  const HostTensor there = read_npy(kGolden / "seq2seq_small" / "expected.npy");
  ASSERT_EQ(here.shape(), there.shape());
  ASSERT_EQ(here.nbytes(), there.nbytes());
  EXPECT_EQ(std::memcmp(here.data(), there.data(), here.nbytes()), 0);

  const fs::path gguf = non_ascii_dir() / fs::path(u8"всё.gguf");
  fs::copy_file(kGoldenGguf / "all_types.gguf", gguf, fs::copy_options::overwrite_existing);
  for (auto access : {GgufFile::Access::map, GgufFile::Access::read}) {
    GgufFile mine(gguf, access);
    GgufFile original(kGoldenGguf / "all_types.gguf", access);
    ASSERT_EQ(mine.tensors().size(), original.tensors().size());
    ASSERT_GT(mine.tensors().size(), 0u);
    const std::string name = original.tensors().front().name;
    EXPECT_EQ(mine.dequantize_rows(mine.tensors().front(), 0, 1),
              original.dequantize_rows(original.tensors().front(), 0, 1))
        << name;
  }
}

TEST_F(Platform, WritingUnderANonAsciiPathReplacesTheFile) {
  const fs::path out = non_ascii_dir() / fs::path(u8"ünïcode.npy");
  const HostTensor a = HostTensor::from_f32({3}, std::vector<float>{1, 2, 3});
  const HostTensor b = HostTensor::from_f32({2, 2}, std::vector<float>{4, 5, 6, 7});
  write_npy(out, a);
  // The second write renames over the first: on Windows that needs MoveFileEx, not rename.
  write_npy(out, b);
  const HostTensor back = read_npy(out);
  ASSERT_EQ(back.shape(), b.shape());
  EXPECT_EQ(back.to_f32(), b.to_f32());
  // No temporary file is left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    files += e.path().filename().u8string().starts_with(u8"ünïcode.npy");
  EXPECT_EQ(files, 1);
}

TEST_F(Platform, ErrorsNameNonAsciiPathsAsUtf8) {
  const fs::path missing = non_ascii_dir() / fs::path(u8"nicht-da.npy");
  EXPECT_TRUE(fails_with([&] { read_npy(missing); }, ErrorCode::io, utf8(missing)));
  // A directory is named as one, not read.
  EXPECT_TRUE(fails_with([&] { read_npy(non_ascii_dir()); }, ErrorCode::io, "is a directory"));
  EXPECT_TRUE(fails_with([&] { Model::load(device(), utf8(non_ascii_dir() / "none")); },
                         ErrorCode::io, "does not exist"));
}

}  // namespace
}  // namespace vkformer::testing
