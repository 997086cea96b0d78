#include "test_util.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#ifdef _WIN32
#include <process.h>
#include <windows.h>
// The POSIX names the helpers below use, in the C runtime's spelling.
#define popen _popen
#define pclose _pclose
#define getpid _getpid
static int setenv(const char* name, const char* value, int) { return _putenv_s(name, value); }
static int unsetenv(const char* name) { return _putenv_s(name, ""); }
#else
#include <time.h>
#include <unistd.h>
#endif

namespace vkformer::testing {

std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<double> stored(const std::vector<float>& values, DType dtype) {
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = dtype == DType::f16 ? half_to_float(float_to_half(values[i])) : values[i];
  return out;
}

HostTensor make_tensor(const Shape& shape, const std::vector<float>& values, DType dtype) {
  return HostTensor::from_f32(shape, values, dtype);
}

WeightMatrix random_weight(DType t, int64_t n, int64_t k, uint32_t seed) {
  if (is_float(t)) {
    const auto v = random_values(static_cast<size_t>(n * k), seed);
    return {make_tensor({n, k}, v, t), stored(v, t)};
  }
  std::vector<std::byte> bytes(dtype_bytes(t, n * k));
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  // Byte offsets of the f16 scales in a block (ggml-common.h) and their ranges.
  struct Scale {
    uint64_t offset;
    float lo, hi;
  };
  std::vector<Scale> scales = {{0, 0.001f, 0.02f}};
  if (t == DType::q4_1) scales.push_back({2, -0.16f, -0.008f});
  if (t == DType::q4_k || t == DType::q5_k) scales = {{0, 0.0005f, 0.003f}, {2, 0.0002f, 0.002f}};
  if (t == DType::q6_k) scales = {{208, 0.0002f, 0.001f}};
  for (uint64_t at = 0; at < bytes.size(); at += dtype_block_bytes(t))
    for (const Scale& sc : scales) {
      const uint16_t half = float_to_half(std::uniform_real_distribution<float>(sc.lo, sc.hi)(rng));
      std::memcpy(&bytes[at + sc.offset], &half, 2);
    }
  WeightMatrix w;
  w.raw = HostTensor::from_bytes({n, k}, t, bytes);
  const std::vector<float> v = w.raw.to_f32();
  w.values.assign(v.begin(), v.end());
  return w;
}

std::vector<double> int8_blocks(const std::vector<double>& x, std::vector<double>& scales) {
  std::vector<double> out(x.size());
  scales.assign(x.size() / 32, 0.0);
  for (size_t b = 0; b < scales.size(); ++b) {
    double amax = 0;
    for (size_t e = 0; e < 32; ++e) amax = std::max(amax, std::abs(x[b * 32 + e]));
    const double d = amax / 127;
    scales[b] = d;
    for (size_t e = 0; e < 32; ++e) out[b * 32 + e] = d > 0 ? d * std::round(x[b * 32 + e] / d) : 0.0;
  }
  return out;
}

double int8_activation_bound(const std::vector<double>& x, const std::vector<double>& w, int64_t m,
                             int64_t n, int64_t k) {
  std::vector<double> dx;
  int8_blocks(x, dx);
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double bound = 0;
      for (int64_t b = 0; b < k / 32; ++b) {
        double wsum = 0;
        for (int64_t e = b * 32; e < b * 32 + 32; ++e) wsum += std::abs(w[j * k + e]);
        bound += dx[i * (k / 32) + b] / 2 * wsum;
      }
      worst = std::max(worst, bound);
    }
  return worst;
}

Tolerance default_tolerance(DType dtype) {
  return dtype == DType::f16 ? Tolerance{2e-3, 2e-3} : Tolerance{1e-5, 1e-5};
}

::testing::AssertionResult all_close(const HostTensor& got, const std::vector<double>& want,
                                     Tolerance tol) {
  if (static_cast<size_t>(got.numel()) != want.size())
    return ::testing::AssertionFailure() << "size " << got.numel() << " vs reference " << want.size();
  auto values = got.to_f32();
  double worst_excess = 0, max_err = 0;
  size_t worst = 0, bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = values[i], w = want[i];
    bool same_inf = std::isinf(g) && std::isinf(w) && (g > 0) == (w > 0);
    double err = same_inf ? 0.0 : std::abs(g - w);
    if (std::isnan(g) || std::isnan(err)) err = INFINITY;
    max_err = std::max(max_err, err);
    double excess = err - (tol.atol + tol.rtol * std::abs(w));
    if (excess > 0) {
      ++bad;
      if (excess > worst_excess || bad == 1) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << "max abs error " << max_err;
  return ::testing::AssertionFailure()
         << bad << " of " << want.size() << " elements out of tolerance (atol " << tol.atol
         << ", rtol " << tol.rtol << "); worst at flat index " << worst << ": got " << values[worst]
         << ", want " << want[worst] << "; max abs error " << max_err;
}

std::string shape_name(const Shape& s) {
  std::string r;
  for (auto d : s.dims()) r += std::to_string(d) + "x";
  r.pop_back();
  return r;
}

std::string shape_name(const Shape& s, DType dtype) { return shape_name(s) + "_" + std::string(dtype_name(dtype)); }

std::string shape_case_name(const ::testing::TestParamInfo<ShapeCase>& info) {
  return shape_name(info.param.shape, info.param.dtype);
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

double max_abs_error(const HostTensor& got, const std::vector<double>& want) {
  auto values = got.to_f32();
  double m = 0;
  for (size_t i = 0; i < want.size(); ++i) m = std::max(m, std::abs(values[i] - want[i]));
  return m;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = dist(rng);
  if (n > 0) ids[0] = static_cast<int32_t>(vocab - 1);
  if (n > 1) ids[static_cast<size_t>(n - 1)] = 0;
  if (n > 2) ids[1] = ids[0];
  return ids;
}

double relative_error(std::span<const float> got, std::span<const float> want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::vector<double> broadcast_to(const std::vector<double>& values, const Shape& in, const Shape& out) {
  std::vector<double> o(static_cast<size_t>(out.numel()));
  const int r = out.rank();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, src = 0, stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      int64_t c = rest % out[d];
      rest /= out[d];
      int di = d - (r - in.rank());
      if (di >= 0) {
        src += (in[di] == 1 ? 0 : c) * stride;
        stride *= in[di];
      }
    }
    o[static_cast<size_t>(i)] = values[static_cast<size_t>(src)];
  }
  return o;
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  setenv(name, value, 1);
}

ScopedEnv::~ScopedEnv() {
  if (old_) setenv(name_, old_->c_str(), 1);
  else unsetenv(name_);
}

::testing::AssertionResult fails_with(const std::function<void()>& f, ErrorCode code,
                                      std::string_view needle) {
  try {
    f();
  } catch (const Error& e) {
    std::string_view msg = e.what();
    if (e.code() != code)
      return ::testing::AssertionFailure() << "error code " << to_string(e.code()) << ", expected "
                                           << to_string(code) << ": " << msg;
    if (msg.find(needle) == std::string_view::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << needle << "\": " << msg;
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a vkformer::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error; expected " << to_string(code) << " with \""
                                       << needle << "\"";
}

std::string error_message(const std::function<void()>& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.code() == code ? e.what() : "";
  }
  ADD_FAILURE() << "no error; expected " << to_string(code);
  return "";
}

std::string env_error(const char* name, const char* value, const std::function<void()>& read) {
  ScopedEnv env(name, value);
  try {
    read();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << what;
    EXPECT_NE(what.find(std::string(name) + "='" + value + "'"), std::string::npos) << what;
    return what;
  }
  ADD_FAILURE() << name << "='" << value << "': expected an error";
  return "";
}

void expect_env_rules(const char* name, std::initializer_list<EnvRule> rules, const std::function<void()>& read) {
  for (const EnvRule& r : rules) {
    const std::string what = env_error(name, r.value, read);
    EXPECT_NE(what.find(r.rule), std::string::npos) << name << "=" << r.value << ": " << what;
  }
}

FetchedModel run_fetch_script(const std::string& script, const std::string& hint) {
  FetchedModel m;
  const std::string command = "'" + script + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    m.error = "cannot run " + command;
    return m;
  }
  std::string output;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (status != 0) {
    const std::string name = std::filesystem::path(script).filename().string();
    m.error = "scripts/" + name + " failed (" + hint + "):\n" + output;
    return m;
  }
  m.path = output.substr(output.find_last_of('\n') + 1);  // its last line
  return m;
}

uint64_t process_id() { return static_cast<uint64_t>(::getpid()); }

double thread_cpu_seconds() {
#ifdef _WIN32
  FILETIME created, exited, kernel, user;  // 100 ns units
  if (!GetThreadTimes(GetCurrentThread(), &created, &exited, &kernel, &user)) return 0;
  auto ticks = [](const FILETIME& t) { return (uint64_t(t.dwHighDateTime) << 32) | t.dwLowDateTime; };
  return double(ticks(kernel) + ticks(user)) * 1e-7;
#else
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
#endif
}

const std::filesystem::path& scratch_dir(const std::string& name) {
  struct Dir {
    std::filesystem::path path;
    explicit Dir(const std::string& name) {
      path = std::filesystem::temp_directory_path() /
             ("vkformer_" + name + "_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir(name);
  return dir.path;
}

void within_seconds(int seconds, const char* what, const std::function<void()>& f) {
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < seconds * 20 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) {
      std::fprintf(stderr, "FAILED: %s did not return within %d s (blocked?)\n", what, seconds);
      std::_Exit(1);
    }
  });
  struct Finish {
    std::atomic<bool>& done;
    std::thread& watchdog;
    ~Finish() {
      done = true;
      watchdog.join();
    }
  } finish{done, watchdog};
  f();
}

}  // namespace vkformer::testing
