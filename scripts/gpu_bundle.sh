#!/usr/bin/env bash
# Prepares a GPU run through the `device` tool (see ../shared/GPU.md): a Release build whose
# binaries carry their own libstdc++, the Vulkan loader and validation layers as Debian packages,
# and one command that runs the test suite and the benchmarks there (vkformer next to PyTorch).
#
#   scripts/gpu_bundle.sh          # builds build-gpu/, fills .devrun/ and .gl/, prints the command
#
# Then run that command with the device tool, carrying .gl and .devrun; results land in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

# .gl/ and .devrun/ are in .gitignore, so they never reach a commit.
if ! ls .gl/libvulkan1_*.deb .gl/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 vulkan-validationlayers)
fi

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-gpu -j"$(nproc)"

rm -rf .devrun && mkdir -p .devrun/tests
cp build-gpu/tools/vkformer .devrun/
cp build-gpu/tests/*_test .devrun/tests/
cp bench/torch_bench.py bench/compare.py .devrun/
strip .devrun/vkformer .devrun/tests/*_test
du -sh .devrun .gl

cat <<'CMD'
Command for the device tool (carry: [".gl", ".devrun"]):

for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json VKFORMER_GOLDEN_DIR=$PWD/tests/golden
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpu.txt
.devrun/vkformer devices | tee -a $OUT/gpu.txt
for t in .devrun/tests/*_test; do echo "== $t"; $t --gtest_brief=1 2>&1 | tail -3; done | tee $OUT/tests.txt
.devrun/vkformer bench --json $OUT/vkformer.json > $OUT/bench.txt 2>&1
VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES=1 .devrun/vkformer bench --filter decoder_step --json $OUT/decode-unfused.json > $OUT/decode-unfused.txt 2>&1
python3 .devrun/torch_bench.py --json $OUT/torch.json > $OUT/torch.txt 2>&1
python3 .devrun/compare.py $OUT/vkformer.json $OUT/torch.json > $OUT/compare.md 2>&1; cat $OUT/compare.md
CMD
