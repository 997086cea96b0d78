# cmake -DVKFORMER=<the vkformer tool> -DOUT=<json file to write> -P check_bench.cmake
# Runs a tiny `vkformer bench --quick` and checks the JSON keys that bench/plot.py and scripts
# rely on. Needs one Vulkan device with timestamp queries (lavapipe will do); a few seconds.
if(NOT VKFORMER OR NOT OUT)
  message(FATAL_ERROR "check_bench.cmake: -DVKFORMER=<tool> and -DOUT=<file> are required")
endif()
unset(ENV{VKFORMER_DEVICE})
# Under a cross build the programs run through the emulator (-DLAUNCHER=wine).
set(VKFORMER ${LAUNCHER} ${VKFORMER})
file(REMOVE ${OUT})

# The quick f32 layer norm (1024 x 512, milliseconds even on lavapipe) and the quick peak probes.
execute_process(
  COMMAND ${VKFORMER} bench --quick --filter "layer_norm/affine/f32" --repeats 3 --warmup 1
          --json ${OUT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "vkformer bench: exit status ${rc}\n${out}\n${err}")
endif()
foreach(needle "Peak: FMA" "GFLOP/s" "layer_norm affine" "rows=1024 d=512")
  string(FIND "${out}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "vkformer bench: the table lacks '${needle}':\n${out}")
  endif()
endforeach()

file(READ ${OUT} doc)
string(JSON n_devices LENGTH "${doc}" devices)
if(n_devices LESS 1)
  message(FATAL_ERROR "${OUT}: no devices")
endif()
foreach(key name vendor driver api_version)
  string(JSON v ERROR_VARIABLE e GET "${doc}" devices 0 device ${key})
  if(e)
    message(FATAL_ERROR "${OUT}: devices[0].device has no '${key}'")
  endif()
endforeach()
foreach(key fma_gflops copy_gbps)
  string(JSON v ERROR_VARIABLE e GET "${doc}" devices 0 peak ${key})
  if(e OR NOT v GREATER 0)
    message(FATAL_ERROR "${OUT}: devices[0].peak.${key} is missing or not positive (${v})")
  endif()
endforeach()
string(JSON n_results LENGTH "${doc}" devices 0 results)
if(NOT n_results EQUAL 1)
  message(FATAL_ERROR "${OUT}: expected 1 result, got ${n_results}")
endif()
foreach(key name shape dtype median_us min_us max_us gflops gbps peak_fraction status)
  string(JSON v ERROR_VARIABLE e GET "${doc}" devices 0 results 0 ${key})
  if(e)
    message(FATAL_ERROR "${OUT}: results[0] has no '${key}'")
  endif()
endforeach()
string(JSON status GET "${doc}" devices 0 results 0 status)
string(JSON name GET "${doc}" devices 0 results 0 name)
string(JSON rows GET "${doc}" devices 0 results 0 shape rows)
string(JSON median TYPE "${doc}" devices 0 results 0 median_us)
string(JSON lo GET "${doc}" devices 0 results 0 min_us)
string(JSON med GET "${doc}" devices 0 results 0 median_us)
string(JSON hi GET "${doc}" devices 0 results 0 max_us)
if(NOT status STREQUAL "ok" OR NOT name STREQUAL "layer_norm" OR NOT rows EQUAL 1024 OR
   NOT median STREQUAL "NUMBER" OR lo GREATER med OR med GREATER hi)
  message(FATAL_ERROR "${OUT}: unexpected result: status ${status}, name ${name}, rows ${rows}, "
                      "min/median/max ${lo} ${med} ${hi}")
endif()

# A benchmark that would take too long is reported as skipped, with its reason and null timings,
# and does not fail the run.
execute_process(
  COMMAND ${VKFORMER} bench --quick --filter "layer_norm/affine/f32" --max-run-seconds 1e-9
          --json ${OUT}.skipped
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "skipped: one run would take about")
  message(FATAL_ERROR "vkformer bench --max-run-seconds 1e-9: status ${rc}\n${out}\n${err}")
endif()
file(READ ${OUT}.skipped doc)
string(JSON status GET "${doc}" devices 0 results 0 status)
string(JSON reason GET "${doc}" devices 0 results 0 reason)
string(JSON median TYPE "${doc}" devices 0 results 0 median_us)
if(NOT status STREQUAL "skipped" OR reason STREQUAL "" OR NOT median STREQUAL "NULL")
  message(FATAL_ERROR "${OUT}.skipped: expected a skipped result with a reason and null "
                      "timings, got status ${status}, reason '${reason}', median ${median}")
endif()

# A bad --filter is a usage error that names the option.
execute_process(COMMAND ${VKFORMER} bench --filter "no-such-benchmark" --no-peak
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "no benchmark matches --filter 'no-such-benchmark'")
  message(FATAL_ERROR "vkformer bench --filter no-such-benchmark: status ${rc}: ${err}")
endif()
# An unwritable --json is an error before any benchmark runs, with the reason (the system's
# words: Windows says "(error 3)", ERROR_PATH_NOT_FOUND, in its own language).
set(no_folder "No such file or directory")
if(TARGET_SYSTEM STREQUAL "Windows")
  set(no_folder "[^\n]*\\(error 3\\)")
endif()
execute_process(COMMAND ${VKFORMER} bench --filter "layer_norm" --no-peak --json ${OUT}.missing/x.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "--json: cannot open .*x.json for writing: ${no_folder}"
   OR out MATCHES "layer_norm")
  message(FATAL_ERROR "vkformer bench --json into a missing folder: status ${rc}: ${out} ${err}")
endif()
message(STATUS "vkformer bench: ok (${n_results} result, JSON keys present)")
