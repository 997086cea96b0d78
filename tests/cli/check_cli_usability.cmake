# cmake -DVKFORMER=<the vkformer tool> -DFETCH_MINILM=<scripts/fetch_minilm.sh>
#       -DFETCH_SMOLLM2=<scripts/fetch_smollm2.sh> -DTINY=<tests/golden_llama/tiny>
#       -DGOLDEN=<tests/golden> -DOUT=<scratch dir> -P check_cli_usability.cmake
# The tool as people type it (issue 25): llama.cpp's short options, "did you mean", one exit
# status rule (2: the command line; 1: anything else), messages that name the option and the
# remedy (never a C++ method), --model recognized for what it is, UTF-8 checked the same way
# everywhere, -v, progress, Ctrl-C, the piped chat transcript and readable token text.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
set(tool ${VKFORMER})
cli_check_start(check_cli_usability.cmake VKFORMER FETCH_MINILM FETCH_SMOLLM2 TINY GOLDEN OUT)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
fetch_model(${FETCH_MINILM} minilm)
fetch_model(${FETCH_SMOLLM2} smollm2)
set(tiny ${TINY}/tiny_llama_untied.gguf)
set(seq2seq ${GOLDEN}/seq2seq_small)

# Fails when the last output names a C++ method ("LanguageModel::append", "truncate()").
function(expect_no_cpp_names)
  if(last_output MATCHES "[A-Za-z]+::[a-z_]+|[a-z_]+\\(\\)")
    message(SEND_ERROR "the message names C++ internals (${CMAKE_MATCH_0}):\n${last_output}")
  endif()
endfunction()

# llama.cpp's short options: -m, -p, -c, --temp.
expect(0 "stop: max tokens" generate -m ${tiny} -p hello -n 4 -c 64 --temp 0)
expect(0 "384 dimensions" embed -m ${minilm} "one text" --output ${OUT}/one.npy)

# "Did you mean", and the help that lists the right words.
expect(2 "^vkformer: error: unknown command 'gnerate'; did you mean 'generate'\\?\nRun 'vkformer --help'" gnerate)
expect(2 "^vkformer: error: unknown option '--promt' for 'vkformer generate'; did you mean '--prompt'\\?\nRun 'vkformer generate --help' for its options"
       generate -m ${tiny} --promt hi)
expect(2 "unknown option '--modle' for 'vkformer embed'; did you mean '--model'\\?\nRun 'vkformer embed --help'"
       embed --modle ${minilm} x)
expect(2 "^vkformer: error: --only 'atention.tiles': no such tunable; did you mean 'attention.tiles'\\?[^\n]*tune --list[^\n]*\nRun 'vkformer tune --help'"
       tune --only atention.tiles --no-save)
expect(2 "^vkformer: error: --max-tokens: expected a whole number[^\n]*\nRun 'vkformer generate --help' for its options"
       generate -m ${tiny} -p hi -n 0)

# One exit-status rule, stated in --help: 2 for the command line, 1 for the rest.
expect(0 "Exit status: 0 on success; 2 when the command line is wrong.*1 when anything else fails" --help)
foreach(cmd "generate;-p;hi" "chat" "embed;x" "tokenize;x")
  expect(1 "^vkformer: error: --model: '${OUT}/missing' does not exist\n$" ${cmd} -m ${OUT}/missing)
endforeach()
expect(2 "--top: expected a whole number" embed -m ${minilm} --query q --top 0 x)
expect(2 "--max-length: expected a whole number" tokenize -m ${minilm} --max-length -1 x)
expect(2 "no texts: give them as arguments or with --file" embed -m ${minilm})
expect(2 "no texts: give them as arguments or with --file" tokenize -m ${minilm})

# Messages name the option and the remedy, never a C++ method.
expect(2 "^vkformer: error: --ctx 100000 is more than this model's context length \\(8192 tokens\\): give --ctx 8192 or less"
       generate -m ${smollm2} -p hi --ctx 100000)
expect_no_cpp_names()
file(WRITE ${OUT}/hi.txt "What is the capital of France?\n")
expect(1 "the context \\(--ctx\\) holds 10 .*give a shorter message or a larger --ctx" STDIN ${OUT}/hi.txt
             chat -m ${smollm2} --ctx 10)
expect_no_cpp_names()
expect(2 "the prompt has [0-9]+ tokens but the context \\(--ctx\\) holds 8: .*larger --ctx or a shorter prompt"
       generate -m ${tiny} -p "hello hello hello hello hello hello hello hello hello" -c 8)
expect_no_cpp_names()

# --model recognized for what it is; the command that fits is named.
file(WRITE ${OUT}/README.md "# not a model\n")
expect(2 "--model ${OUT}/README.md is a file that is not a model.*'generate' takes a GGUF language model"
       generate -m ${OUT}/README.md -p hi)
expect(2 "--model ${minilm} is a BERT sentence-embedding model directory.*try 'vkformer embed --model ${minilm}"
       generate -m ${minilm} -p hi)
expect(2 "--model ${seq2seq} is a PyTorch-shaped model directory.*'chat' takes a GGUF language model"
       chat -m ${seq2seq})
expect(2 "--model ${tiny} is a GGUF language model; 'embed' takes a BERT.*try 'vkformer chat --model"
       embed -m ${tiny} x)
expect(2 "--model ${tiny} is a GGUF language model; 'run' takes" run -m ${tiny} --input x.npy --output y.npy)
expect(2 "--model ${minilm} is a BERT sentence-embedding model directory; 'tune' takes a GGUF language model"
       tune -m ${minilm} --list)
expect(2 "--src IDS is required with a seq2seq model directory" generate -m ${seq2seq})
expect(2 "--prompt and --chat are for GGUF language models;.*give --src IDS" generate -m ${seq2seq} -p hi)
expect(0 "-m,--model FILE.gguf\\|DIR REQUIRED\n +A GGUF language model file \\(with --prompt\\) or a seq2seq model directory"
       generate --help)

# Invalid UTF-8 is refused the same way everywhere: where, which byte, and how to convert.
string(ASCII 255 ff)
set(utf8_hint "is not valid UTF-8 \\(byte 0xFF at offset 3\\): vkformer reads text as UTF-8; convert it first")
# (Windows hands a program its arguments as UTF-16: there the byte never arrives as it is.)
if(NOT TARGET_SYSTEM STREQUAL "Windows")
  expect(2 "^vkformer: error: --prompt ${utf8_hint}" generate -m ${tiny} -p "abc${ff}")
  expect(2 "^vkformer: error: text 1 ${utf8_hint}" embed -m ${minilm} "abc${ff}")
  expect(2 "^vkformer: error: text 1 ${utf8_hint}" tokenize -m ${tiny} "abc${ff}")
  expect(2 "^vkformer: error: --system ${utf8_hint}" chat -m ${tiny} --system "abc${ff}")
endif()
file(WRITE ${OUT}/bad.txt "fine\nabc${ff}\n")
expect(1 "^vkformer: error: line 2 of --file ${OUT}/bad.txt ${utf8_hint}" embed -m ${minilm} --file ${OUT}/bad.txt)
expect(1 "vkformer: error: stdin line 2 ${utf8_hint}[^\n]*; the message is skipped" STDIN ${OUT}/bad.txt chat -m ${tiny} -n 2)

# -v prints what it promises for a GGUF model too: the KV cache's types and bytes per token among it.
expect(0 "device +[0-9]+: [^\n]+\nmodel +${tiny}: llama, [0-9]+ layers, d_model [0-9]+[^\n]*\nkv cache +K f32, V f32: [0-9]+ bytes per token[^\n]*\nload +[0-9.]+ m?s"
       generate -m ${tiny} -p hello -n 2 -v)

# A piped chat is a transcript: each line echoed before its reply.
file(WRITE ${OUT}/turns.txt "hello\nagain\n")
expect(0 "^> hello\n[^\n]*\n\n(vkformer chat: [^\n]*\n)?> again\n" STDIN ${OUT}/turns.txt chat -m ${tiny} -n 3)

# tokenize shows each token's text beside its byte-level piece; a character split over tokens
# as <0x..> bytes.
expect(0 "\"tokens\":\\[\"Hello\",\",\",\"Ġworld\",\"!\"\\],\"text\":\\[\"Hello\",\",\",\" world\",\"!\"\\]"
       tokenize -m ${smollm2} "Hello, world!")
expect(0 "\"text\":\\[[^]]*<0xF0>" tokenize -m ${smollm2} "llama 🦙")

# Progress: embed --file of many lines and bench warm-ups report on stderr (plain lines here,
# stderr not being a terminal).
set(lines "")
foreach(i RANGE 1 130)
  string(APPEND lines "sentence number ${i}\n")
endforeach()
file(WRITE ${OUT}/many.txt "${lines}")
expect(0 "vkformer embed: texts: 64/130 \\([0-9.]+ s\\)\n.*vkformer embed: texts: 130/130"
       embed -m ${minilm} --file ${OUT}/many.txt --output ${OUT}/many.npy)
expect(0 "vkformer bench: loading [^\n]*\npp16 warm-up" bench -m ${tiny} -p 16 -n 4 -r 1)

# Ctrl-C during generation: the statistics so far, then exit status 130. The signal is sent once
# text has started to arrive (generation is under way: polled, up to 120 s), from a shell, as a
# terminal would. A tool that goes on (a background job of sh starts with SIGINT ignored) is
# killed after 30 s, a hang guard: it stops within a token (well under a second) when it works.
if(NOT LAUNCHER AND NOT CMAKE_HOST_WIN32)
  execute_process(COMMAND sh -c "
      '${tool}' generate -m '${smollm2}' -p '1, 2, 3, 4, 5, 6, 7,' -n 4000 -c 4096 >'${OUT}/count.txt' 2>'${OUT}/count.err' &
      pid=$!
      i=0
      while [ ! -s '${OUT}/count.txt' ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done
      kill -INT $pid
      i=0
      while kill -0 $pid 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i+1)); done
      kill -KILL $pid 2>/dev/null && echo 'still running 30 s after SIGINT: killed'
      wait $pid
      echo \"status $?\""
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(READ ${OUT}/count.err count_err)
  if(NOT out MATCHES "status 130" OR NOT count_err MATCHES "vkformer generate: prompt [0-9]+ tokens[^\n]*generation [0-9]+ tokens[^\n]*stop: stopped by the callback\nvkformer: interrupted \\(Ctrl-C\\)")
    message(SEND_ERROR "generate interrupted with SIGINT: ${out}${err}\nstderr:\n${count_err}")
  else()
    message(STATUS "generate, Ctrl-C: statistics and status 130: ok")
  endif()
endif()
