# cmake -DVKFORMER=<the vkformer tool> -DTINY=<tests/golden_llama/tiny> -DGOLDEN=<tests/golden>
#       -DOUT=<scratch dir> -P check_cli_reliability.cmake
# The tool against the inputs of issue 26, each of which once bent silently, hung, crashed or
# ended a conversation: integers beyond their type, options the model does not take, a directory
# on stdin, a GGUF named otherwise, an empty query, a 100,000-character word, a block_count of
# 10^9 under a memory limit, and chats whose context fills up.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
set(tool ${VKFORMER})
cli_check_start(check_cli_reliability.cmake VKFORMER TINY GOLDEN OUT)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(model ${TINY}/tiny_llama_untied.gguf)
set(seq2seq ${GOLDEN}/seq2seq_small)

set(EXPECT_TIMEOUT 120)  # no case may take longer

# count(<var> <regex> <text>): how many times the regex matches.
function(count var regex text)
  string(REGEX MATCHALL "${regex}" all "${text}")
  list(LENGTH all n)
  set(${var} ${n} PARENT_SCOPE)
endfunction()

# --------------------------------------------------------------------------- integers

# 9223372036854775808 saturated, 18446744073709551616 wrapped, -1 was 2^64 - 1 and a size_t
# --max-length of -1 no limit; now each is refused with its range.
set(usage "\nRun 'vkformer [a-z]+ --help' for its options")
expect(2 "^vkformer: error: --max-tokens: expected a whole number from 1 to 2147483647, got '9223372036854775808'${usage}"
       generate --model ${model} --prompt hi -n 9223372036854775808)
expect(2 "^vkformer: error: --seed: expected a whole number from 0 to 18446744073709551615, got '18446744073709551616'${usage}"
       generate --model ${model} --prompt hi --seed 18446744073709551616)
expect(2 "^vkformer: error: --seed: expected a whole number from 0 to 18446744073709551615, got '-1'${usage}"
       generate --model ${model} --prompt hi --seed -1)
expect(2 "^vkformer: error: --max-length: expected a whole number from 0 to 2147483647, got '-1'${usage}"
       tokenize --model ${OUT} --max-length -1 hello)
expect(2 "^vkformer: error: -p: expected a whole number from 0 to 2147483647, got '99999999999999999999'${usage}"
       bench --model ${model} -p 99999999999999999999)
expect(2 "^vkformer: error: -r: expected a whole number from 1 to 1000000, got '0'${usage}" bench --model ${model} -r 0)
expect(2 "^vkformer: error: --ctx: expected a whole number from 0 to 2147483647, got '1e3'" chat --model ${model} --ctx 1e3)
expect(2 "^vkformer: error: --top-k: expected a whole number from 0 to 2147483647, got '0x10'"
       generate --model ${model} --prompt hi --top-k 0x10)
expect(2 "^vkformer: error: --max-tokens: expected a whole number from 1 to 2147483647, got '\\+5'"
       generate --model ${model} --prompt hi -n +5)
expect(2 "^vkformer: error: --repeat-last-n: expected a whole number from 0 to 2147483647, got '2147483648'"
       generate --model ${model} --prompt hi --repeat-last-n 2147483648)
expect(2 "^vkformer: error: --beam: expected a whole number from 1 to 64, got '65'"
       generate --model ${seq2seq} --src 5 --beam 65)
expect(2 "^vkformer: error: --eos: expected a whole number from -1 to 2147483647, got '-2'"
       generate --model ${seq2seq} --src 5 --eos -2)
expect(2 "^vkformer: error: --top: expected a whole number from 1 to 1073741824, got '0'"
       embed --model ${OUT} --query q --top 0 x)
# The largest seed is a seed.
expect(0 "stop: max tokens" generate --model ${model} --prompt hello -n 2 --temperature 1 --seed 18446744073709551615)

# --------------------------------------------------------------------------- options of another model

# --beam and --dtype were accepted and ignored with a GGUF model.
expect(2 "^vkformer: error: --beam applies to seq2seq model directories, not to the GGUF language model [^\n]*tiny_llama_untied.gguf"
       generate --model ${model} --prompt hi --beam 2)
expect(2 "^vkformer: error: --dtype applies to seq2seq model directories" generate --model ${model} --prompt hi --dtype f16)
expect(2 "^vkformer: error: --length-penalty applies to seq2seq" generate --model ${model} --prompt hi --length-penalty 1)
# And the language models' options with a seq2seq directory (whose errors have exit status 1).
expect(2 "^vkformer: error: --temperature applies to GGUF language models; [^\n]*seq2seq_small is a model directory"
       generate --model ${seq2seq} --src 5 --temperature 0.5)
expect(2 "^vkformer: error: --ctx applies to GGUF language models" generate --model ${seq2seq} --src 5 --ctx 8)
expect(0 "tokens" generate --model ${seq2seq} --src 5,6,7 --beam 2)

# --query "" was silently no query. (Passed literally: a list would drop the "".)
execute_process(COMMAND ${VKFORMER} embed --model ${OUT} --query "" x RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out TIMEOUT 60)
if(NOT rc EQUAL 2 OR NOT out MATCHES "^vkformer: error: --query: the query is empty")
  message(SEND_ERROR "vkformer embed --query '': status ${rc}, expected 2 and 'the query is empty':\n${out}")
endif()

# --------------------------------------------------------------------------- files

# tokenize took a GGUF named model.bin for a vocab.txt (generate looks at the first bytes).
configure_file(${model} ${OUT}/model.bin COPYONLY)
expect(0 "^\\{\"ids\":\\[[0-9,]+\\],\"tokens\":" tokenize --model ${model} "hello world")
set(as_gguf "${last_output}")
expect(0 "^\\{\"ids\":" tokenize --model ${OUT}/model.bin "hello world")
if(NOT last_output STREQUAL as_gguf)
  message(SEND_ERROR "tokenize model.bin: '${last_output}', as tiny_llama_untied.gguf: '${as_gguf}'")
endif()

# One word of 100,000 characters, which max_input_chars_per_word allows: the cubic loop ran
# for minutes (5,000 characters took 1.8 s); now well within the timeout.
file(MAKE_DIRECTORY ${OUT}/long_word)
# tokenizer.json as Hugging Face writes it for a BertTokenizerFast, with max_input_chars_per_word
# `chars` and a vocabulary of [UNK], [CLS], [SEP], [PAD], ab and ##ab.
function(write_tokenizer chars)
  file(WRITE ${OUT}/long_word/tokenizer.json "{
  \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": true,
                 \"strip_accents\": null, \"lowercase\": true},
  \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},
  \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [
    {\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}},
    {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}]},
  \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\",
            \"max_input_chars_per_word\": ${chars},
            \"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2, \"[PAD]\": 3, \"ab\": 4, \"##ab\": 5}}}")
endfunction()
write_tokenizer(100000)
string(REPEAT "ab" 50000 word)
file(WRITE ${OUT}/long_word/text.txt "${word}\n")
expect(0 "^\\{\"ids\":\\[1,4,5,5,5,[0-9,]+,5,2\\]" tokenize --model ${OUT}/long_word --file ${OUT}/long_word/text.txt)
count(n "5," "${last_output}")
if(NOT n EQUAL 49999)
  message(SEND_ERROR "tokenize of a 100,000-character word: ${n} ##ab pieces, expected 49999")
endif()
write_tokenizer(1048576)
expect(1 "^vkformer: error: [^\n]*tokenizer.json: max_input_chars_per_word is 1048576, more than the 100000 vkformer allows"
       tokenize --model ${OUT}/long_word hello)

if(NOT TARGET_SYSTEM STREQUAL "Windows")
  # A directory on stdin: the chat ended as at EOF, with status 0 and no output.
  execute_process(COMMAND sh -c "exec \"$0\" chat --model \"$1\" < \"$2\"" ${tool} ${model} ${OUT}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
  if(NOT rc EQUAL 1 OR NOT out MATCHES "vkformer: error: cannot read the chat from stdin: Is a directory")
    message(SEND_ERROR "vkformer chat < a directory: status ${rc}, expected 1 and 'Is a directory':\n${out}")
  else()
    message(STATUS "vkformer chat < a directory: ok")
  endif()

  # llama.block_count 10^9 (0x3b9aca00) under a 4 GB address space: the loader planned 9 * 10^9
  # tensors before checking one, grew to 3.9 GB and said "out of host memory".
  file(READ ${model} hex HEX)
  string(HEX "llama.block_count" key)
  string(FIND "${hex}" "${key}04000000" at)
  math(EXPR offset "(${at} + 34 + 8) / 2")  # after the key (17 bytes) and its type (4)
  configure_file(${model} ${OUT}/blocks.gguf COPYONLY)
  execute_process(COMMAND sh -c "printf '\\000\\312\\232\\073' | dd of=\"$0\" bs=1 seek=$1 conv=notrunc 2>/dev/null"
                  ${OUT}/blocks.gguf ${offset} RESULT_VARIABLE rc)
  # Under AddressSanitizer (scripts/sanitize.sh sets ASAN_OPTIONS) the process reserves terabytes
  # of shadow address space at start, so ulimit -v cannot bound it: ASan's own limit on resident
  # memory (checked every 100 ms) does instead.
  set(bound "ulimit -v 4000000")
  if(NOT "$ENV{ASAN_OPTIONS}" STREQUAL "")
    set(bound "export ASAN_OPTIONS=\"$ASAN_OPTIONS:hard_rss_limit_mb=4000\"")
  endif()
  execute_process(COMMAND sh -c "${bound} && exec \"$0\" generate --model \"$1\" --prompt hi"
                  ${tool} ${OUT}/blocks.gguf RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 120)
  if(NOT rc EQUAL 1 OR NOT out MATCHES "blocks.gguf: llama.block_count is 1000000000 but the file's tensors are those of 2 blocks")
    message(SEND_ERROR "vkformer generate, block_count 10^9, ${bound}: status ${rc}:\n${out}")
  else()
    message(STATUS "vkformer generate, block_count 10^9 under ${bound}: ok")
  endif()
endif()

# --------------------------------------------------------------------------- chat with a full context

# Each once ended the chat with exit 2 and "LanguageModel::append: ... truncate() or reset()
# first". Now a message that cannot fit is skipped with a message naming --ctx and the chat goes
# on (exit status 1 at the end: README, "Exit status"); turns that fill the context make the
# oldest ones go.
file(WRITE ${OUT}/two.txt "hello\nagain\n")
expect(1 "this message takes [0-9]+ tokens with the system message, but the context \\(--ctx\\) holds 1[^\n]*skipped[^\n]*--ctx\n(> again\n)?[^\n]*this message takes[^\n]*--ctx\nvkformer chat: 2 messages were skipped"
       STDIN ${OUT}/two.txt chat --model ${model} --ctx 1)
string(REPEAT "be brief and polite. " 60 long_system)
expect(1 "this message takes [0-9]+ tokens with the system message, but the context \\(--ctx\\) holds 64[^\n]*or --system or a larger --ctx"
       STDIN ${OUT}/two.txt chat --model ${model} --ctx 64 --system "${long_system}")
string(REPEAT "hello " 100 long_line)
file(WRITE ${OUT}/long_line.txt "hello\n${long_line}\nagain\n")
expect(1 "turn [0-9]+ tokens[^\n]*\n.*this message takes [0-9]+ tokens with the system message, but the context \\(--ctx\\) holds 96[^\n]*\n.*turn [0-9]+ tokens.*1 message was skipped"
       STDIN ${OUT}/long_line.txt chat --model ${model} --ctx 96 -n 8)
set(turns "")
foreach(i RANGE 1 10)
  string(APPEND turns "tell me about the number ${i}\n")
endforeach()
file(WRITE ${OUT}/turns.txt "${turns}")
expect(0 "the context \\(--ctx 96 tokens\\) is full: forgot the oldest [0-9]+ turns?" STDIN ${OUT}/turns.txt
       chat --model ${model} --ctx 96 -n 12)
count(n "vkformer chat: turn " "${last_output}")
if(NOT n EQUAL 10)
  message(SEND_ERROR "chat with a context that fills: ${n} replies to 10 messages:\n${last_output}")
endif()
