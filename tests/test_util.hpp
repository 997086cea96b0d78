#pragma once
// Random inputs and comparisons with stated tolerances for the op tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

// Deterministic uniform values in [lo, hi).
std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// What a tensor of `dtype` stores for `values`: f16 rounds, so references are computed from the
// rounded values.
std::vector<double> stored(const std::vector<float>& values, DType dtype);
HostTensor make_tensor(const Shape& shape, const std::vector<float>& values, DType dtype);

// A weight matrix [n, k] as the device gets it (raw) and the values the host reads from it
// (HostTensor::to_f32, which equals gguf's dequantization bit for bit: quant_matmul_test).
struct WeightMatrix {
  HostTensor raw;
  std::vector<double> values;
};
// Random blocks of a quantized type whose f16 scales have a model's sizes (d, q4_1's m, the
// K-quants' d and dmin, q6_k's d at its end; the rest of each block random), or random values
// for a float type.
WeightMatrix random_weight(DType t, int64_t n, int64_t k, uint32_t seed);

// Rows of x quantized per block of 32 values as the integer-dot kernels do (ggml's q8_1): dx =
// max|x_b| / 127, x̂ = dx * round(x / dx); each block's dx in `scales`.
std::vector<double> int8_blocks(const std::vector<double>& x, std::vector<double>& scales);
// The most that x's 8-bit rounding (|x - x̂| <= dx/2) moves an output of x [m, k] · w [n, k]ᵀ:
// the largest Σ_b dx_b / 2 * Σ_{e in b} |w_e| over the outputs (before alpha and activation).
double int8_activation_bound(const std::vector<double>& x, const std::vector<double>& w, int64_t m,
                             int64_t n, int64_t k);

struct Tolerance {
  double atol;
  double rtol;
};
// f32: fp32 arithmetic against a double reference; f16: also the output rounding (2^-11 relative).
Tolerance default_tolerance(DType dtype);

// Every element within atol + rtol * |want|; the message names the worst element and the max error.
::testing::AssertionResult all_close(const HostTensor& got, const std::vector<double>& want,
                                     Tolerance tol);

double max_abs_error(const HostTensor& got, const std::vector<double>& want);
// n token ids in [0, vocab) for embedding lookups: random (std::mt19937 from `seed`), with both
// ends of the table (the first id vocab - 1, the last 0) and a repeat (the second id = the first).
std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed);
// max |got - want| / max |want| (over want's elements): how far a row of logits is from the
// reference, whatever the logits' scale.
double relative_error(std::span<const float> got, std::span<const float> want);
// "2x3x5", and "2x3x5_f16" with a dtype: test case names of shapes.
std::string shape_name(const Shape& s);
std::string shape_name(const Shape& s, DType dtype);
// A parameter of one shape and dtype (elementwise and row ops) and its test name, "2x3x5_f16".
struct ShapeCase {
  Shape shape;
  DType dtype;
};
std::string shape_case_name(const ::testing::TestParamInfo<ShapeCase>& info);
// "1.23e-06": an error as text, for RecordProperty (see --gtest_output=xml).
std::string sci(double v);

// `values` of shape `in` broadcast (numpy rules) to `out`, row-major: masks and operands for the
// double-precision references.
std::vector<double> broadcast_to(const std::vector<double>& values, const Shape& in, const Shape& out);

// f() throws a vkformer::Error with `code` whose message contains `needle`; otherwise the
// failure says what happened instead (use as EXPECT_TRUE(fails_with(...))).
::testing::AssertionResult fails_with(const std::function<void()>& f, ErrorCode code,
                                      std::string_view needle);
// The message of the vkformer::Error with `code` that f() throws, for tests that compare all of
// it; a failure (and "") where f() throws nothing, something else or another code.
std::string error_message(const std::function<void()>& f, ErrorCode code);

// A model that a fetch script (scripts/fetch_*.sh, run as `script`) installs into its cache and
// names on its last line of output. `error` holds why there is none: the script's output when
// it fails, after `hint`; a failed fetch fails the tests that need the model, never skips them.
struct FetchedModel {
  std::filesystem::path path;
  std::string error;
};
FetchedModel run_fetch_script(const std::string& script, const std::string& hint);

// The test process's id, for unique temporary names (getpid or GetCurrentProcessId).
uint64_t process_id();

// CPU time this thread has used, in seconds (clock_gettime or GetThreadTimes). Unlike time on
// the clock it does not grow while the thread waits for a core, so a bound on it holds on a
// loaded machine: for a bound on how much work something does, not on how long it waits.
double thread_cpu_seconds();

// A folder for this test binary's files, <tmp>/vkformer_<name>_<pid>, made on first use and
// removed at exit (the first call's name holds for the binary).
const std::filesystem::path& scratch_dir(const std::string& name);

// Runs f, ending the whole binary with a message if it takes longer than `seconds`: a read that
// blocks on a FIFO, or reads a link to /dev/zero until memory runs out, would otherwise hang the
// suite until ctest's timeout.
void within_seconds(int seconds, const char* what, const std::function<void()>& f);

// Sets an environment variable (a tuning override) for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The message of the error that `read` throws while environment variable `name` is `value`; a
// test failure (and "") unless it is invalid_argument and quotes the variable: NAME='value'.
std::string env_error(const char* name, const char* value, const std::function<void()>& read);
// One row of expect_env_rules: an override's value and a part of the message refusing it.
struct EnvRule {
  const char* value;
  std::string rule;
};
// For each row, name=value is refused by read() as env_error checks, with a message naming the rule.
void expect_env_rules(const char* name, std::initializer_list<EnvRule> rules, const std::function<void()>& read);

}  // namespace vkformer::testing
