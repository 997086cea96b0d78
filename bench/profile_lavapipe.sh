#!/usr/bin/env bash
# Where a benchmark spends its time inside lavapipe's JIT code: samples `vkformer bench` with
# perf (software clock, so it works in VMs without hardware counters), dumps the JIT code with gdb
# (same addresses: both run with ASLR off) and prints the hottest instruction windows and the
# instruction mix weighted by samples (bench/profile_jit.py).
#
#   bench/profile_lavapipe.sh 'attention/fused/f32/batch=1,heads=16,seq=512,d_k=128' [repeats]
#
# Needs perf, gdb, objdump (apt-get install linux-perf gdb binutils) and a built ./build.
set -euo pipefail
filter=${1:?usage: $0 BENCH_ID_REGEX [repeats]}
repeats=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
exe=$root/build/tools/vkformer
out=${PROFILE_DIR:-$(mktemp -d)}
mkdir -p "$out"
for tool in perf gdb objdump; do
  command -v "$tool" >/dev/null || { echo "$0: needs $tool" >&2; exit 2; }
done

setarch -R perf record -q -F 4000 -o "$out/perf.data" \
  "$exe" bench --filter "$filter" --no-peak --repeats "$repeats" --budget 20 | grep -v '^\['
perf script -i "$out/perf.data" -F ip > "$out/ips.txt" 2>/dev/null

# The JIT code: anonymous executable mappings, read once the benchmark has run (its query pool
# is destroyed after the last timing).
run="run bench --filter $filter --no-peak --repeats 1"
gdb -q -batch -ex "set breakpoint pending on" -ex "break vkDestroyQueryPool" -ex "$run" \
  -ex "info proc mappings" "$exe" 2>/dev/null |
  awk '$5 == "r-xp" && NF == 5 {print $1, $2}' > "$out/maps.txt"
[ -s "$out/maps.txt" ] || { echo "$0: found no JIT code mapping" >&2; exit 1; }
dumps=()
i=0
while read -r lo hi; do
  dumps+=(-ex "dump binary memory $out/jit$i.bin $lo $hi")
  i=$((i + 1))
done < "$out/maps.txt"
gdb -q -batch -ex "set breakpoint pending on" -ex "break vkDestroyQueryPool" -ex "$run" \
  "${dumps[@]}" "$exe" >/dev/null 2>&1
: > "$out/jit.s"
i=0
while read -r lo hi; do
  objdump -D -b binary -mi386:x86-64 --adjust-vma="$lo" "$out/jit$i.bin" >> "$out/jit.s"
  i=$((i + 1))
done < "$out/maps.txt"

/usr/bin/python3 "$root/bench/profile_jit.py" "$out/ips.txt" "$out/jit.s"
echo "(files in $out)"
