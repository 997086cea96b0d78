// Hostile inputs to the library's file handling (issue 11): config.json nested 100,000 deep or
// holding numbers beyond int64, paths that are FIFOs, devices, directories, links and link
// loops, outputs that are links, and the loader's own messages when layers come from the
// environment. Each case once crashed, hung, ran out of memory or said something wrong.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "special_files.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(__FILE__).parent_path() / "golden";
const fs::path kEncoder = kGolden / "encoder_post_relu_b1_s1";

// A scratch directory for this process, removed at exit.
const fs::path& scratch() { return vkformer::testing::scratch_dir("hostile_test"); }

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}


std::string nested(char open, char close, size_t depth) {
  return std::string(depth, open) + std::string(depth, close);
}

// ------------------------------------------------------------------------------- config.json

TEST(HostileConfig, DeepNestingIsRefusedNotAStackOverflow) {
  // 80,000 levels: printing the value in the error (nlohmann's dump recurses) overflowed the
  // stack, and so would copying it.
  const std::string deep = nested('[', ']', 80000);
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse("{\"arch\": " + deep + "}", "deep.json"); },
                         ErrorCode::format, "deep.json: arrays and objects nested more than 64 deep"));
  // Anywhere in the file, under a known key or not, arrays or objects.
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse("{\"dropout\": " + objects + "}"); },
                         ErrorCode::format, "nested more than 64 deep"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(deep); }, ErrorCode::format, "nested"));
  // Shallow containers are still described, not printed.
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(R"({"arch": [[1, 2], 3]})"); },
                         ErrorCode::format, "\"arch\" is an array of 2 elements, expected encoder"));
}

// A valid encoder config with `key` set to `value` (JSON text).
std::string config_with(const std::string& key, const std::string& value) {
  const std::pair<const char*, const char*> base[] = {
      {"arch", "\"encoder\""}, {"d_model", "8"}, {"nhead", "2"}, {"dim_feedforward", "8"},
      {"num_encoder_layers", "1"}};
  std::string text = "{";
  for (auto [k, v] : base)
    if (k != key) text += std::string("\"") + k + "\": " + v + ", ";
  return text + "\"" + key + "\": " + value + "}";
}

TEST(HostileConfig, ValuesInMessagesAreShort) {
  const std::string long_string(1 << 20, 'x');
  for (const char* key : {"arch", "activation", "d_model", "norm_first", "mask_check", "layer_norm_eps"}) {
    const std::string text = config_with(key, "\"" + long_string + "\"");
    try {
      ModelConfig::parse(text);
      ADD_FAILURE() << key << ": accepted";
    } catch (const Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 400u) << key << ": " << std::string(e.what()).substr(0, 400);
    }
  }
  std::string big_array = "[";
  for (int i = 0; i < 100000; ++i) big_array += "1,";
  big_array += "1]";
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("d_model", big_array)); },
                         ErrorCode::format, "\"d_model\" must be an integer, got an array of 100001 elements"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("norm_first", "{\"a\": 1}")); },
                         ErrorCode::format, "\"norm_first\" must be true or false, got an object of 1 keys"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse("{\"" + long_string + "\": 1}"); },
                         ErrorCode::format, "unknown key 'xxxx"));
}

TEST(HostileConfig, NumbersBeyondInt64AreReportedAsWritten) {
  // 2^64 - 1 was read as int64 and reported as -1.
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("d_model", "18446744073709551615")); },
                         ErrorCode::format, "\"d_model\" is 18446744073709551615, expected 1..1048576"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("d_model", "9223372036854775808")); },
                         ErrorCode::format, "\"d_model\" is 9223372036854775808, expected"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("d_model", "-9223372036854775808")); },
                         ErrorCode::format, "\"d_model\" is -9223372036854775808, expected"));
  EXPECT_TRUE(fails_with([&] { ModelConfig::parse(config_with("max_len", "18446744073709551615")); },
                         ErrorCode::format, "\"max_len\" is 18446744073709551615, expected"));
  EXPECT_EQ(ModelConfig::parse(config_with("d_model", "8")).d_model, 8);
}

TEST(HostileConfig, ConfigFileMustBeARegularFileOfBoundedSize) {
  const fs::path dir = scratch() / "config_files";
  fs::create_directories(dir);
  const WaitingPipe fifo(dir / "fifo.json");
  // No writer: the read must not wait for one.
  within_seconds(10, "ModelConfig::load of a FIFO", [&] {
    EXPECT_TRUE(fails_with([&] { ModelConfig::load(fifo.path().string()); }, ErrorCode::io,
                           fifo.path().string() + ": is " + fifo_words() + ", not a regular file"));
  });
  // A link to /dev/zero was read until memory ran out.
  const fs::path zero = endless_device_path(dir, "zero.json");
  EXPECT_TRUE(fails_with([&] { ModelConfig::load(zero.string()); }, ErrorCode::io,
                         zero.string() + ": is a character device, not a regular file"));
  // A directory said "unexpected end of input".
  EXPECT_TRUE(fails_with([&] { ModelConfig::load(dir.string()); }, ErrorCode::io,
                         dir.string() + ": is a directory, not a regular file"));
  const fs::path huge = dir / "huge.json";
  write_file(huge, "{}");
  fs::resize_file(huge, 17u << 20);  // sparse: costs no disk
  EXPECT_TRUE(fails_with([&] { ModelConfig::load(huge.string()); }, ErrorCode::io,
                         huge.string() + ": 17825792 bytes, more than the 16777216"));
  const fs::path missing = dir / "missing.json";
  EXPECT_TRUE(fails_with([&] { ModelConfig::load(missing.string()); }, ErrorCode::io,
                         missing.string() + ": cannot open: " + missing_file_reason()));
  // A regular file behind a link is read. The target is absolute: kEncoder is relative where the
  // compiler was given relative paths (ccache's base_dir), and a link's relative target is read
  // from the link's folder, not from the working directory.
  const fs::path link = dir / "link.json";
  link_to_regular_file(fs::absolute(kEncoder / "config.json"), link);
  EXPECT_EQ(ModelConfig::load(link.string()).d_model,
            ModelConfig::load((kEncoder / "config.json").string()).d_model);
}

// ------------------------------------------------------------------------------- readers

TEST(HostileFiles, ReadersSayWhatAPathIs) {
  const fs::path dir = scratch() / "readers";
  fs::create_directories(dir);
  const WaitingPipe fifo(dir / "fifo.npy");
  const fs::path zero = endless_device_path(dir, "zero.safetensors");
  within_seconds(10, "reading a FIFO", [&] {
    EXPECT_TRUE(fails_with([&] { read_npy(fifo.path()); }, ErrorCode::io,
                           fifo.path().string() + ": is " + fifo_words() + ", not a regular file"));
    EXPECT_TRUE(fails_with([&] { SafetensorsFile f(fifo.path()); }, ErrorCode::io,
                           "is " + fifo_words()));
  });
  EXPECT_TRUE(fails_with([&] { SafetensorsFile f(zero); }, ErrorCode::io,
                         zero.string() + ": is a character device, not a regular file"));
  EXPECT_TRUE(fails_with([&] { read_npy(dir); }, ErrorCode::io, "is a directory, not a regular file"));
}

// ------------------------------------------------------------------------------- writers

TEST(HostileFiles, WritersRefuseLinksAndSpecialFiles) {
  const fs::path dir = scratch() / "writers";
  fs::create_directories(dir);
  const std::vector<float> values = {1.0f, 2.0f};
  const HostTensor t = HostTensor::from_f32(Shape{2}, values);
  // A link was replaced by a regular file (and /dev/null, as root, by one too).
  const fs::path target = dir / "target.npy";
  write_file(target, "keep");
  // On Windows a device name in the folder (nul.npy) instead of the link.
  const OutputTrap link = make_output_trap(dir, "link.npy", target);
  EXPECT_TRUE(fails_with([&] { write_npy(link.path, t); }, ErrorCode::io,
                         link.path.string() + link.error_after_path));
  EXPECT_TRUE(link.intact());
  EXPECT_EQ(read_file(target), "keep");
  const std::vector<std::pair<std::string, HostTensor>> tensors = {{"x", t}};
  EXPECT_TRUE(fails_with([&] { write_safetensors(link.path, tensors); }, ErrorCode::io,
                         link.path.string() + link.error_after_path));
  EXPECT_TRUE(link.intact());
  const WaitingPipe fifo(dir / "fifo.npy");
  EXPECT_TRUE(fails_with([&] { write_npy(fifo.path(), t); }, ErrorCode::io,
                         fifo.path().string() + " is " + fifo_words() + ", not a regular file"));
  EXPECT_TRUE(fifo.intact());
  // A regular file is replaced as before.
  write_npy(target, t);
  EXPECT_EQ(read_npy(target).to_f32(), (std::vector<float>{1.0f, 2.0f}));
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find("tmp-vkformer"), std::string::npos) << entry.path();
}

// ------------------------------------------------------------------------------- model directories

TEST_F(DeviceTest, ModelLoadNamesALinkLoopInsteadOfThrowingFilesystemError) {
  const fs::path dir = scratch() / "loop_model";
  fs::create_directories(dir);
  fs::copy_file(kEncoder / "config.json", dir / "config.json");
  {
    // On Windows a file held open without sharing.
    const UnreadableFile weights(dir / "model.safetensors");
    // std::filesystem::exists threw filesystem_error, reported as "internal: ... (please report this)".
    EXPECT_TRUE(fails_with([&] { Model::load(device(), dir.string()); }, ErrorCode::io,
                           (dir / "model.safetensors").string() + weights.error_after_path()));
  }
  // On Windows a name that Windows refuses.
  const fs::path loop_dir = unreachable_path(scratch(), "loop_dir");
  EXPECT_TRUE(fails_with([&] { Model::load(device(), loop_dir.string()); }, ErrorCode::io,
                         "model directory '" + loop_dir.string() +
                             "' cannot be reached: " + unreachable_reason()));
  fs::create_directory(dir / "model.safetensors");
  EXPECT_TRUE(fails_with([&] { Model::load(device(), dir.string()); }, ErrorCode::io,
                         "model.safetensors: is a directory, not a regular file"));
  fs::remove(dir / "model.safetensors");
  EXPECT_TRUE(fails_with([&] { Model::load(device(), dir.string()); }, ErrorCode::io,
                         "model.safetensors' does not exist"));
}

// ------------------------------------------------------------------------------- validation

// VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation (a common habit) makes the loader warn "env var
// 'VK_INSTANCE_LAYERS' defined and adding layers": a loader message, not a validation error.
// DeviceTest::TearDown fails the test on any message the device collected.
TEST_F(DeviceTest, LayersEnabledFromTheEnvironmentAreNotValidationErrors) {
  Device a = open_test_device_with_env({{"VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation"}});
  Device b = open_test_device_with_env({{"VK_LOADER_LAYERS_ENABLE", "*validation"}});
  EXPECT_EQ(a.validation_message_count(), 0u);
  EXPECT_EQ(b.validation_message_count(), 0u);
}

}  // namespace
}  // namespace vkformer::testing
