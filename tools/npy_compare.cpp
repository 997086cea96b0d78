// npy_compare GOT.npy WANT.npy TOLERANCE: checks two arrays of the same shape against each
// other, as tests/model_test.cpp does: max |got - want| / max |want| <= TOLERANCE (a NaN in
// GOT fails). Prints the error; exit status 0 if within, 1 if not, 2 on bad arguments or files.
// Built only with the tests, for tests/cli/check_models.cmake (CI need not have Python).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

int main(int argc, char** argv) {
  using namespace vkformer;
  if (argc != 4) {
    std::fprintf(stderr, "usage: npy_compare GOT.npy WANT.npy TOLERANCE\n");
    return 2;
  }
  try {
    HostTensor got = read_npy(argv[1]);
    HostTensor want = read_npy(argv[2]);
    char* end = nullptr;
    double tolerance = std::strtod(argv[3], &end);
    if (end == argv[3] || *end != '\0' || !(tolerance >= 0)) {
      std::fprintf(stderr, "npy_compare: bad tolerance '%s'\n", argv[3]);
      return 2;
    }
    if (got.shape() != want.shape()) {
      std::printf("npy_compare: shape %s, expected %s\n", got.shape().str().c_str(),
                  want.shape().str().c_str());
      return 1;
    }
    auto g = got.to_f32(), w = want.to_f32();
    double err = 0, scale = 0;
    bool nan = false;
    for (size_t i = 0; i < w.size(); ++i) {
      nan = nan || std::isnan(g[i]);
      err = std::max(err, std::abs(static_cast<double>(g[i]) - w[i]));
      scale = std::max(scale, std::abs(static_cast<double>(w[i])));
    }
    double rel = nan ? INFINITY : err / std::max(scale, 1e-30);
    bool ok = rel <= tolerance;
    std::printf("npy_compare: %s: max error / max |expected| = %.3g (tolerance %g): %s\n",
                got.shape().str().c_str(), rel, tolerance, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "npy_compare: %s\n", e.what());
    return 2;
  }
}
