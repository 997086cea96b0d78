// The per-device tuning cache (src/kernels/tuning_cache.hpp): a round trip into every later device,
// VKFORMER_TUNING=static, environment overrides over the cache, one warning and the static
// table for each kind of broken file (corrupt, truncated, foreign device, stale driver or
// kernels, values the code no longer offers), atomic writes, and where the file lives.
// tests/cli/check_tune.cmake covers another process using what `vkformer tune` wrote.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device_impl.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tunables.hpp"
#include "tuning_cache.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using State = kernels::TuningCacheState;

constexpr const char* kWarning = "vkformer: warning: ignoring the tuning cache";

// Every field a tunable may change, as text: equal texts, equal choices.
std::string describe(const kernels::Tuning& t) {
  std::ostringstream s;
  const kernels::MatmulTuning& m = t.matmul;
  s << "tiles " << m.tiles.bm << "x" << m.tiles.bn << "x" << m.tiles.bk << "/" << m.tiles.tm << "x"
    << m.tiles.tn << m.tiles.shared_memory << " texel " << m.texel_tiles.tm << "x" << m.texel_tiles.tn
    << "x" << m.texel_tiles.qb << "/" << m.texel_tiles.tm_nn << "x" << m.texel_tiles.tn_nn << "x"
    << m.texel_tiles.qb_nn << "/" << m.texel_tiles.transpose_min_m << " gemv "
    << m.gemv_tiles.workgroup << "x" << m.gemv_tiles.columns << " split "
    << m.split_k.target_workgroups << " wq " << m.weight_tiles.bm << "x" << m.weight_tiles.bn << "/"
    << m.weight_tiles.tm << "x" << m.weight_tiles.tn << " " << m.weight_tiles.gemv_workgroup << "/"
    << m.weight_tiles.gemv_lanes << " " << m.weight_tiles.texel_tm << "x" << m.weight_tiles.texel_tn
    << "/" << m.weight_tiles.texel_gemv_tn << " attention " << int(t.attention.kernel) << " "
    << t.attention.invocations << "x" << t.attention.br << "x" << t.attention.bc << " "
    << t.attention.lanes << "x" << t.attention.rows_per_lane << t.attention.shuffle
    << t.attention.texel << " flash "
    << (t.attention.flash.preferred ? t.attention.flash.preferred->str() : "table") << " decode "
    << (t.attention.decode.preferred ? t.attention.decode.preferred->str() : "table") << "/"
    << t.attention.decode.target_workgroups << " coopmat " << m.coopmat_tiles.str()
    << " reduction " << t.reduction_workgroup;
  return s.str();
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class TuningCacheTest : public DeviceTest {
 protected:
  void SetUp() override {
    root_ = scratch_dir("tuning_cache_test") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(root_);
    use_dir("cache");
    tuning_ = std::make_unique<ScopedEnv>("VKFORMER_TUNING", "");
    as_gpu_ = std::make_unique<ScopedEnv>("VKFORMER_TUNING_AS_GPU", "");
    info_ = device().info();
    static_ = kernels::tuning_for(info_, /*tuned=*/false);
    // The first tunable that applies here, and a value other than the static one.
    for (const kernels::Tunable& t : kernels::all_tunables()) {
      if (kernels::tunable_overridden(t)) continue;
      auto c = t.candidates(info_, static_);
      if (c.size() < 2) continue;
      tunable_ = t.id;
      static_value_ = c[0].text;
      value_ = c[1].text;
      break;
    }
    ASSERT_FALSE(tunable_.empty()) << "no tunable applies to '" << info_.name << "'";
    kernels::ScopedTuningTrial trial({{tunable_, value_}});
    tuned_ = kernels::tuning_for(info_);
    ASSERT_NE(describe(tuned_), describe(static_)) << tunable_ << " = " << value_;
  }

  // Points VKFORMER_CACHE_DIR at a fresh folder (each broken file its own path: the warning is
  // once per path and process).
  void use_dir(const std::string& name) {
    cache_.reset();
    cache_ = std::make_unique<ScopedEnv>("VKFORMER_CACHE_DIR", (root_ / name).string().c_str());
  }

  kernels::TuningCacheFile good_file() const {
    kernels::TuningCacheFile f = kernels::tuning_cache_file_for(info_);
    f.vkformer_version = "test";
    f.shapes = "made by tuning_cache_test";
    kernels::TunedChoice c;
    c.tunable = tunable_;
    c.value = value_;
    c.static_value = static_value_;
    c.static_us = 100;
    c.tuned_us = 90;
    f.choices.push_back(c);
    return f;
  }

  std::string good_text() {
    kernels::write_tuning_cache(info_, good_file());
    std::ifstream in(kernels::tuning_cache_path(info_), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  void write_text(const std::string& text) {
    fs::create_directories(kernels::tuning_cache_path(info_).parent_path());
    std::ofstream(kernels::tuning_cache_path(info_), std::ios::binary) << text;
  }

  // The tuning this process applies, checked three times and once in a newly opened device,
  // with the warnings printed meanwhile.
  std::string applied(std::string* warnings) {
    ::testing::internal::CaptureStderr();
    std::string d;
    for (int i = 0; i < 3; ++i) d = describe(kernels::tuning_for(info_));
    Device other = open_test_device_with_env({});
    EXPECT_EQ(describe(other.impl().tuning()), d) << "a new device applies what tuning_for says";
    *warnings = ::testing::internal::GetCapturedStderr();
    return d;
  }

  fs::path root_;
  std::unique_ptr<ScopedEnv> cache_, tuning_, as_gpu_;
  DeviceInfo info_;
  kernels::Tuning static_, tuned_;
  std::string tunable_, value_, static_value_;
};

TEST_F(TuningCacheTest, RoundTripAppliesTheTunedChoiceInEveryNewDevice) {
  const fs::path path = kernels::write_tuning_cache(info_, good_file());
  EXPECT_EQ(path, kernels::tuning_cache_path(info_));
  EXPECT_EQ(path.parent_path(), root_ / "cache" / "tuning");
  EXPECT_EQ(path.filename().string(), info_.uuid + ".json");

  const State s = kernels::tuning_cache_state(info_);
  ASSERT_EQ(s.status, State::Status::tuned) << s.problem;
  ASSERT_EQ(s.choices.size(), 1u);
  EXPECT_EQ(s.choices[0].tunable, tunable_);
  EXPECT_EQ(s.choices[0].value, value_);
  EXPECT_EQ(s.choices[0].static_value, static_value_);
  EXPECT_EQ(s.choices[0].static_us, 100);
  EXPECT_EQ(s.choices[0].tuned_us, 90);

  std::string warnings;
  EXPECT_EQ(applied(&warnings), describe(tuned_));
  EXPECT_EQ(warnings, "");
  // Executors read the device's tuning: a device opened now has the tuned choice.
  Device d = open_test_device_with_env({});
  EXPECT_EQ(describe(d.impl().tuning()), describe(tuned_));
  // Without a file: the static table, and no warning.
  fs::remove(path);
  EXPECT_EQ(kernels::tuning_cache_state(info_).status, State::Status::absent);
  EXPECT_EQ(applied(&warnings), describe(static_));
  EXPECT_EQ(warnings, "");
}

TEST_F(TuningCacheTest, VkformerTuningStaticIgnoresTheCache) {
  kernels::write_tuning_cache(info_, good_file());
  {
    ScopedEnv env("VKFORMER_TUNING", "static");
    std::string warnings;
    EXPECT_EQ(applied(&warnings), describe(static_));
    EXPECT_EQ(warnings, "");
    const State s = kernels::tuning_cache_state(info_);
    EXPECT_EQ(s.status, State::Status::static_table);
    EXPECT_NE(s.reason.find("VKFORMER_TUNING=static"), std::string::npos) << s.reason;
  }
  {
    ScopedEnv env("VKFORMER_TUNING", "cache");
    EXPECT_EQ(describe(kernels::tuning_for(info_)), describe(tuned_));
  }
  // The test mode that runs GPU configurations on CPU devices never takes measured choices.
  {
    ScopedEnv env("VKFORMER_TUNING_AS_GPU", "1");
    EXPECT_EQ(kernels::tuning_cache_state(info_).status, State::Status::static_table);
  }
  EXPECT_NE(env_error("VKFORMER_TUNING", "off", [&] { kernels::tuning_for(info_); }).find("static"),
            std::string::npos);
}

TEST_F(TuningCacheTest, AnEnvironmentOverrideWinsOverTheCache) {
  const kernels::Tunable* t = kernels::find_tunable("attention.tiles");
  ASSERT_NE(t, nullptr);
  const auto c = t->candidates(info_, static_);
  ASSERT_GE(c.size(), 2u);
  kernels::TuningCacheFile f = good_file();
  f.choices = {{t->id, c[1].text, c[0].text, 10, 9}};
  kernels::write_tuning_cache(info_, f);
  kernels::Tuning want;
  {
    kernels::ScopedTuningTrial trial({{t->id, c[1].text}});
    want = kernels::tuning_for(info_);
  }
  EXPECT_EQ(describe(kernels::tuning_for(info_)), describe(want));
  // The override gives the static value back: the cached one must not replace it.
  ScopedEnv env(t->env.c_str(), c[0].text.c_str());
  EXPECT_EQ(describe(kernels::tuning_for(info_)), describe(static_));
  const State s = kernels::tuning_cache_state(info_);
  ASSERT_EQ(s.status, State::Status::tuned) << s.problem;
  ASSERT_EQ(s.overridden.size(), 1u);
  EXPECT_NE(s.overridden[0].find(t->env), std::string::npos);
}

// Each broken file: the static table, exactly one warning naming the file and the problem, and
// `vkformer devices` (tuning_cache_state) saying why.
TEST_F(TuningCacheTest, BrokenFilesGiveOneWarningAndTheStaticTable) {
  const std::string good = good_text();
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  struct Case {
    const char* name;
    std::string text;
    const char* problem;
  };
  const std::string kernels = kernels::kernels_hash();
  const std::vector<Case> cases = {
      {"corrupt", "\x01\x02 not json {{{", "corrupt"},
      {"truncated", good.substr(0, good.size() / 2), "corrupt"},
      {"empty", "", "corrupt"},
      {"not-an-object", "[1, 2, 3]", "corrupt"},
      {"missing-key", replaced("\"choices\"", "\"choice\""), "corrupt"},
      {"wrong-type", replaced("\"" + value_ + "\"", "17"), "corrupt"},
      {"other-format", replaced("vkformer tuning cache 1", "vkformer tuning cache 0"), "format"},
      {"foreign-uuid", replaced("\"" + info_.uuid + "\"", "\"00112233445566778899aabbccddeeff\""),
       "foreign"},
      {"foreign-name", replaced("\"name\": \"", "\"name\": \"another "), "foreign"},
      {"stale-driver", replaced("\"driver_version\": \"", "\"driver_version\": \"9."), "stale"},
      {"stale-kernels", replaced(kernels, "fnv1a64:0000000000000000"), "other kernels"},
      {"stale-value", replaced("\"value\": \"" + value_ + "\"", "\"value\": \"7x7x7/7\""),
       "not one of its candidates"},
      {"stale-static", replaced("\"static\": \"" + static_value_ + "\"", "\"static\": \"1x1\""),
       "measured against the static choice"},
      {"unknown-tunable", replaced("\"tunable\": \"" + tunable_ + "\"", "\"tunable\": \"gone.x\""),
       "unknown tunable"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    use_dir(c.name);
    write_text(c.text);
    std::string warnings;
    EXPECT_EQ(applied(&warnings), describe(static_));
    EXPECT_EQ(count(warnings, kWarning), 1u) << warnings;
    EXPECT_NE(warnings.find(kernels::tuning_cache_path(info_).string()), std::string::npos) << warnings;
    EXPECT_NE(warnings.find(c.problem), std::string::npos) << warnings;
    const State s = kernels::tuning_cache_state(info_);
    EXPECT_EQ(s.status, State::Status::ignored);
    EXPECT_NE(s.problem.find(c.problem), std::string::npos) << s.problem;
  }
  // A folder where the file should be.
  use_dir("folder");
  fs::create_directories(kernels::tuning_cache_path(info_));
  std::string warnings;
  EXPECT_EQ(applied(&warnings), describe(static_));
  EXPECT_EQ(count(warnings, kWarning), 1u) << warnings;
}

// Readers never see half a file: one thread rewrites the cache (two contents of very different
// sizes) while this one reads it; every read applies. A write in place (truncate, then write)
// fails this within a few rounds. (On Windows a file that a reader holds open cannot be replaced
// but renamed aside first, so there a read may also find no file for an instant: never a torn one.)
TEST_F(TuningCacheTest, WritesAreAtomic) {
  kernels::TuningCacheFile small = good_file(), large = good_file();
  large.shapes = std::string(200000, 's');
  kernels::write_tuning_cache(info_, small);
  std::atomic<bool> done{false};
  std::atomic<int> writes{0}, write_errors{0}, reads{0};
  std::string first_error;
  constexpr int kWrites = 400, kReads = 100;
  std::thread writer([&] {
    // Until both sides have done their share, however the two threads are scheduled: a reader
    // starved on a loaded machine could make too few reads in a fixed 400 writes (issue 40). The
    // deadline only ends a hang: the whole of this binary takes about 2.4 s.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (int i = 0; !done && (i < kWrites || reads < kReads) && std::chrono::steady_clock::now() < deadline;
         ++i) {
      try {
        kernels::write_tuning_cache(info_, i % 2 ? small : large);
        ++writes;
      } catch (const Error& e) {
        if (write_errors++ == 0) first_error = e.what();
      }
    }
    done = true;
  });
  int absent = 0;
  while (!done) {
    const State s = kernels::tuning_cache_state(info_);
    if (s.status == State::Status::ignored) {
      done = true;
      writer.join();
      FAIL() << "read " << reads << " saw a broken file: " << s.problem;
    }
    absent += s.status == State::Status::absent;
    ++reads;
  }
  writer.join();
  EXPECT_GE(reads.load(), kReads) << "the writer stopped at its hang guard";
  EXPECT_GT(writes.load(), 10);
#ifndef _WIN32
  EXPECT_EQ(absent, 0) << "a reader found no file while it was being replaced";
  EXPECT_EQ(write_errors.load(), 0) << first_error;
#endif
  // Nothing left beside the file: the temporary files were all renamed.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kernels::tuning_cache_path(info_).parent_path()))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{info_.uuid + ".json"});
}

TEST_F(TuningCacheTest, TheCacheFolderFollowsTheFetchScripts) {
  ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache"), home("HOME", "/home/h"), local("LOCALAPPDATA", "");
  {
    ScopedEnv dir("VKFORMER_CACHE_DIR", "/v");
    EXPECT_EQ(kernels::tuning_cache_dir(), fs::path("/v/tuning"));
  }
  ScopedEnv dir("VKFORMER_CACHE_DIR", "");
  EXPECT_EQ(kernels::tuning_cache_dir(), fs::path("/x/cache/vkformer/tuning"));
  {
    ScopedEnv no_xdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(kernels::tuning_cache_dir(), fs::path("/home/h/.cache/vkformer/tuning"));
    ScopedEnv no_home("HOME", "");
    EXPECT_TRUE(kernels::tuning_cache_dir().empty());
    EXPECT_EQ(kernels::tuning_cache_state(info_).status, State::Status::absent);
    EXPECT_TRUE(fails_with([&] { kernels::write_tuning_cache(info_, good_file()); }, ErrorCode::io,
                           "no cache directory"));
    EXPECT_EQ(describe(kernels::tuning_for(info_)), describe(static_));
  }
}

TEST_F(TuningCacheTest, TrialsTakeOnlyCandidates) {
  kernels::write_tuning_cache(info_, good_file());
  {
    // A trial replaces the cache: here, by nothing (the static table).
    kernels::ScopedTuningTrial trial({});
    EXPECT_EQ(describe(kernels::tuning_for(info_)), describe(static_));
    EXPECT_TRUE(fails_with([] { kernels::ScopedTuningTrial again({}); }, ErrorCode::invalid_argument,
                           "already active"));
  }
  kernels::ScopedTuningTrial trial({{tunable_, "no such value"}});
  EXPECT_TRUE(fails_with([&] { kernels::tuning_for(info_); }, ErrorCode::invalid_argument,
                         "not one of its candidates"));
}

TEST(TuningCacheKey, KernelsHashIsStableAndNamed) {
  const std::string h = kernels::kernels_hash();
  ASSERT_EQ(h.size(), 8u + 16u) << h;
  EXPECT_EQ(h.substr(0, 8), "fnv1a64:");
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef", 8), std::string::npos) << h;
  EXPECT_EQ(kernels::kernels_hash(), h);
}

}  // namespace
}  // namespace vkformer::testing
