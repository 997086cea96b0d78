# cmake -DVKFORMER=<the vkformer tool> -DTINY=<tests/golden_llama/tiny> -DOUT=<scratch dir>
#       [-DSMOLLM2=<SmolLM2-135M-Instruct.Q4_1.gguf>] -P check_llm_cli.cmake
# `vkformer generate --model FILE.gguf`, `vkformer chat` and `vkformer bench --model` on the tiny
# llama (greedy output is deterministic: the same text twice, the C++ tests check its tokens),
# SmolLM2's greedy answer when SMOLLM2 is given, and every bad input: one line, exit status 2
# for the command line's mistakes, 1 for files (README, "Exit status").
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_llm_cli.cmake VKFORMER TINY OUT)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(model ${TINY}/tiny_llama_untied.gguf)

set(EXPECT_SEPARATE_STREAMS ON)  # expect() (cli_check_util.cmake) leaves stdout in last_stdout

# Generation: text on stdout, the speeds on stderr; greedy twice gives the same text.
expect(0 "vkformer generate: prompt [0-9]+ tokens in [0-9.]+ s \\([0-9.]+ tokens/s\\), generation 8 tokens in [0-9.]+ s \\([0-9.]+ tokens/s\\), stop: max tokens"
       generate --model ${model} --prompt "hello" -n 8)
set(first "${last_stdout}")
expect(0 "stop: max tokens" generate --model ${model} --prompt "hello" -n 8)
if(NOT last_stdout STREQUAL first OR first STREQUAL "\n")
  message(SEND_ERROR "greedy generate twice: '${first}' then '${last_stdout}'")
endif()
expect(0 "generation [0-9]+ tokens" generate --model ${model} --prompt "hello" --chat -n 4 --temperature 0.8
       --top-k 40 --top-p 0.95 --min-p 0.05 --repeat-penalty 1.1 --seed 7)
# --chat-template NAME: a prompt format by name overrides the file's template; an unknown name
# lists the names; without --chat it is refused.
expect(0 "generation [0-9]+ tokens" generate --model ${model} --prompt "hello" --chat --chat-template llama3 -n 2)
file(WRITE ${OUT}/hello.txt "hello\n")
expect(0 "vkformer chat: turn [0-9]+ tokens" STDIN ${OUT}/hello.txt chat --model ${model} -n 2 --chat-template phi3)
expect(2 "^vkformer: error: chat template: no format named 'llama9'; the formats: chatml, llama3[^\n]*\n"
       generate --model ${model} --prompt "hello" --chat --chat-template llama9)
expect(2 "^vkformer: error: --chat-template is for --chat\n"
       generate --model ${model} --prompt "hello" --chat-template llama3)
# A directory that holds no model: the loader names the missing file (exit status 1).
expect(1 "--model: ${OUT}[/\\\\]config.json: cannot open" generate --model ${OUT})  # Windows joins with a backslash

# Chat: two user lines, two replies, the cache kept (the second turn appends fewer tokens than
# the whole conversation has).
file(WRITE ${OUT}/turns.txt "hello\n\nagain\n")
expect(0 "vkformer chat: turn [0-9]+ tokens, cache [0-9]+ of 128;[^\n]*\nvkformer chat: turn [0-9]+ tokens, cache [0-9]+ of 128"
       STDIN ${OUT}/turns.txt chat --model ${model} -n 4 --system "Be brief.")

# Bench: pp and tg rows and the JSON.
expect(0 "\\| pp16 +\\| +[0-9.]+ ± [0-9.]+ +\\|\n\\| tg8 +\\| +[0-9.]+ ± [0-9.]+ +\\|"
       bench --model ${model} -p 16 -n 8 -r 2 --json ${OUT}/bench.json)
file(READ ${OUT}/bench.json json)
string(JSON test GET "${json}" llm 1 test)
string(JSON n LENGTH "${json}" llm 1 samples_ts)
if(NOT test STREQUAL "tg8" OR NOT n EQUAL 2)
  message(SEND_ERROR "bench.json: llm[1] is '${test}' with ${n} samples, expected tg8 with 2")
endif()
# The decoded token per kernel (lavapipe has timestamps): its kernels' weight bytes add up to the
# recording's count for the pass, and the decode GB/s is printed (no copy probe: --no-peak).
expect(0 "decoded token by kernel[^\n]*\n\\| kernel .*\ndecode reads weights at [0-9.]+ GB/s"
       bench --model ${model} -p 0 -n 4 -r 1 --no-peak --json ${OUT}/bench_kernels.json)
file(READ ${OUT}/bench_kernels.json json)
string(JSON total GET "${json}" per_decoded_token weight_bytes_read)
string(JSON count LENGTH "${json}" decoded_token_by_kernel kernels)
set(sum 0)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON b GET "${json}" decoded_token_by_kernel kernels ${i} weight_bytes_read)
  math(EXPR sum "${sum} + ${b}")
endforeach()
if(count LESS 2 OR NOT sum EQUAL total)
  message(SEND_ERROR "bench_kernels.json: ${count} kernels reading ${sum} weight bytes, expected "
                     "several adding up to the decoded token's ${total}")
endif()

# KV cache types (issue 37): -v says what a token takes (the kquant tiny llama: 2 layers, 2 KV
# heads of 64: q8_0 keys 2 x 34 bytes, q4_0 values 2 x 18 a head and layer); bench --model takes
# them and -d; an unknown type is exit status 2 naming the option, and so is a quantized type on
# the untied tiny llama's head dim of 16.
expect(0 "kv cache +K q8_0, V q4_0: 416 bytes per token[^\n]*; rotated by Hadamard blocks of 64 \\(q, k\\) and 64 \\(v\\)\n"
       generate --model ${TINY}/tiny_llama_kquant.gguf --prompt "hello" -n 4 -v --cache-type-k q8_0 --cache-type-v q4_0)
# --no-kv-rotation: the same caches stored unrotated (the line ends with the context that fits).
expect(0 "kv cache +K q8_0, V q4_0: 416 bytes per token[^\n]*holds a context of [0-9]+\n"
       generate --model ${TINY}/tiny_llama_kquant.gguf --prompt "hello" -n 4 -v --cache-type-k q8_0 --cache-type-v q4_0
       --no-kv-rotation)
expect(0 "kv cache: K q4_0, V q8_0: 416 bytes per token.*\\| tg4 @ d20 +\\|"
       bench --model ${TINY}/tiny_llama_kquant.gguf -p 0 -n 4 -d 20 -r 1 --cache-type-k q4_0 --cache-type-v q8_0)
expect(2 "^vkformer: error: --cache-type-k: unknown cache type 'q9': expected f32, f16, q8_0 or q4_0\n"
       generate --model ${model} --prompt "hello" --cache-type-k q9)
expect(2 "^vkformer: error: --cache-type-v: unknown cache type 'Q8_0': expected f32, f16, q8_0 or q4_0\n"
       bench --model ${model} -p 4 -n 0 --cache-type-v Q8_0)
expect(2 "^vkformer: error: --cache-type-v q4_0 \\(not the activations' type\\) is read in whole blocks of 32 values a row, and this model's head dim is 16: leave it to the activations' type \\(f32\\)\n"
       STDIN ${OUT}/hello.txt chat --model ${model} --cache-type-v q4_0)

# Bad input: one line on stderr (and the command's help named), exit status 2, nothing loaded.
# Integers are parsed strictly by the command line (cli.hpp), with their range in the message.
expect(2 "^vkformer: error: --max-tokens: expected a whole number from 1 to 2147483647, got '0'\n"
       generate --model ${model} --prompt hi -n 0)
expect(2 "^vkformer: error: --temperature must be a number >= 0 \\(0: greedy\\), got -1\nRun 'vkformer generate --help' for its options\\.\n$"
       generate --model ${model} --prompt hi --temperature -1)
expect(2 "^vkformer: error: --top-p must be in \\(0, 1\\] \\(1: off\\), got 1.5\nRun 'vkformer generate --help' for its options\\.\n$"
       generate --model ${model} --prompt hi --top-p 1.5)
expect(2 "^vkformer: error: --min-p must be in \\[0, 1\\] \\(0: off\\), got nan\nRun 'vkformer generate --help' for its options\\.\n$"
       generate --model ${model} --prompt hi --min-p nan)
expect(2 "^vkformer: error: --repeat-penalty must be a number > 0 \\(1: off\\), got 0\nRun 'vkformer chat --help' for its options\\.\n$"
       chat --model ${model} --repeat-penalty 0)
expect(2 "^vkformer: error: --top-k: expected a whole number from 0 to 2147483647, got '-3'\n"
       generate --model ${model} --prompt hi --top-k -3)
string(REPEAT "hello " 40 long)
expect(2 "^vkformer: error: the prompt has [0-9]+ tokens but the context \\(--ctx\\) holds 16: no room to generate[^\n]*\nRun 'vkformer generate --help' for its options\\.\n$"
       generate --model ${model} --prompt "${long}" --ctx 16)
expect(1 "^vkformer: error: --model: '${OUT}/missing.gguf' does not exist\n$"
       generate --model ${OUT}/missing.gguf --prompt hi)
file(WRITE ${OUT}/corrupt.gguf "GGUF, then not a GGUF header")
expect(1 "^vkformer: error: [^\n]*corrupt.gguf[^\n]*\n$" generate --model ${OUT}/corrupt.gguf --prompt hi)
expect(1 "^vkformer: error: [^\n]*\n$" chat --model ${OUT}/corrupt.gguf)

if(SMOLLM2)
  # The real model answers the demo question; greedy, so the answer is fixed.
  expect(0 "Paris" generate --model ${SMOLLM2} --prompt "What is the capital of France?" --chat -n 12)
endif()
