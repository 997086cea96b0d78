#!/usr/bin/env bash
# The test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (gcc) and run by ctest,
# leak checking on. Its own build directory, so it never disturbs `make test`'s build/.
#
#   scripts/sanitize.sh            configure (once), build, run every test
#   scripts/sanitize.sh -R io_     extra arguments go to ctest (here: only the io tests)
#   SANITIZE_SET=host scripts/sanitize.sh
#                                  only the suites whose work is mostly vkformer's own host code
#                                  (file readers, tokenizers, graph and executor, C API, the tool),
#                                  built alone: CI's set, as the kernel suites spend their time in
#                                  lavapipe, which is not instrumented, and the full build takes
#                                  ~15 min on 2 cores
#
# Variables: BUILD_DIR (build-asan), BUILD_TYPE (RelWithDebInfo), JOBS (all cores),
# TEST_JOBS (2), SANITIZE_SET (all). Suppressions: scripts/lsan.supp (third-party leaks only, each
# with its reason).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

BUILD_DIR=${BUILD_DIR:-build-asan}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TEST_JOBS=${TEST_JOBS:-2}

./scripts/install_deps.sh

# Through the environment rather than -DCMAKE_CXX_FLAGS: CMake takes CXXFLAGS/LDFLAGS at the first
# configure, and the projects the tests configure themselves (examples/consumer) inherit them, so
# they link the instrumented library with the sanitizer runtimes too.
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
export CFLAGS="$san" CXXFLAGS="$san" LDFLAGS="-fsanitize=address,undefined"

if [[ -f "$BUILD_DIR/CMakeCache.txt" && ( -f "$BUILD_DIR/Makefile" || -f "$BUILD_DIR/build.ninja" ) ]]; then
  echo "sanitize: $BUILD_DIR/ is configured"
else
  # -O1 -g1 (line tables): ASan's recommended optimization, file:line in every report, and half
  # the compile time of RelWithDebInfo's -O2 -g. A unity build (several sources per translation
  # unit; src/CMakeLists.txt) halves the library's compile time again.
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
fi
case ${SANITIZE_SET:-all} in
  all)
    targets=(all)
    only=() ;;
  host)
    suites=(core_test device_test graph_test io_test hostile_input_test safetensors_strict_test
            tokenizer_test bpe_tokenizer_test gguf_test sampling_test chat_template_test capi_test
            capi_llm_test memory_limits_test platform_test vulkan_loader_test generate_test
            model_test fault_recovery_test)
    targets=("${suites[@]}" vkformer_cli npy_compare VkLayer_vkformer_fault)
    tests=$(IFS='|'; echo "${suites[*]}")
    only=(-R "^(${tests}|cli|cli_models|cli_hostile|cli_llm|fault_sweep)\$") ;;
  *) echo "sanitize: SANITIZE_SET is 'all' or 'host', not '${SANITIZE_SET}'" >&2; exit 2 ;;
esac
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"

# The Vulkan loader unloads the driver and the layer before LeakSanitizer runs; keeping them loaded
# lets their leaks be named (scripts/lsan.supp). verify_asan_link_order=0: the shim is preloaded
# ahead of the ASan runtime, which is fine since it allocates nothing.
keep="$BUILD_DIR/keep_libraries_loaded.so"
cc -O2 -shared -fPIC -o "$keep" scripts/keep_libraries_loaded.c
export LD_PRELOAD="$root/$keep${LD_PRELOAD:+:$LD_PRELOAD}"

# halt_on_error: the first report fails the test. detect_leaks runs LeakSanitizer at exit.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:verify_asan_link_order=0:strict_init_order=1:check_initialization_order=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# The fault sweep (tests/fault_layer/fault_sweep.py) checks each faulted run of the tool for an
# ASan/LSan report too; here it fails fewer call indices of the frequent functions, since every
# run of the instrumented tool costs more (docs/testing.md, "Faults").
export VKFORMER_FAULT_SWEEP=${VKFORMER_FAULT_SWEEP:-quick}

# ASan's operator new reports an allocation it cannot make and aborts: it never throws
# std::bad_alloc, so core_test leaves out its 2^50-byte allocation check under ASan
# (__SANITIZE_ADDRESS__); `make test` runs it.

# install_package is left out: it also builds a C program with plain `cc` and pkg-config flags,
# which cannot link the instrumented static library (no sanitizer runtime); `make test` runs it.
#
# python and python_faults run on their own, last: the interpreter is not instrumented, so the
# ASan runtime must be preloaded ahead of everything for the extension module to load, and leak
# checking is off there (CPython frees little at exit; the scripts the tests start would report
# it too).
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$TEST_JOBS" -E '^(install_package|python|python_faults)$' "${only[@]}" "$@"
if [[ ${SANITIZE_SET:-all} == all && $# == 0 ]]; then
  LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):$LD_PRELOAD" \
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
    ctest --test-dir "$BUILD_DIR" --output-on-failure -R '^(python|python_faults)$'
fi
