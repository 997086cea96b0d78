# cmake -DVKFORMER=<the vkformer tool> -DFAMILIES=<tests/golden_families> -DOUT=<scratch dir>
#       -P check_perplexity.cmake
# `vkformer perplexity` on a tiny family model (tests/golden_families/llama2.f32.gguf, 320-token
# SentencePiece vocabulary): the lines and the JSON, and every bad input as one line naming the
# option or the file, exit status 2 for the command line's mistakes and 1 for the file's (README,
# "Exit status"). The numbers themselves are perplexity_test's (against transformers' logits and
# the method written out).
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_perplexity.cmake VKFORMER FAMILIES OUT)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(model ${FAMILIES}/llama2.f32.gguf)

# A text of a few hundred tokens for this vocabulary; a trailing newline, as files have.
set(text "")
foreach(i RANGE 1 12)
  string(APPEND text "The river runs past the old mill, and the miller counts ${i} sacks of grain before the evening bell. ")
endforeach()
file(WRITE ${OUT}/text.txt "${text}\n")

# run(<args...>): runs `vkformer perplexity` on the text at --ctx 16, fails the check unless it
# exits with 0, and leaves its stdout and stderr apart in `out` and `err`.
function(run)
  execute_process(COMMAND ${VKFORMER} perplexity -m ${model} -f ${OUT}/text.txt -c 16 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "vkformer perplexity -c 16 ${ARGN}: exit status ${rc}:\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# The running estimate per chunk on stdout, then llama-perplexity's last line; the counts (and
# without a terminal, a progress line per tenth) on stderr.
run()
string(REGEX MATCH "vkformer perplexity: [0-9]+ tokens, ([0-9]+) chunks of 16 \\(the last 7 tokens of each scored\\)\n"
       _ "${err}")
set(chunks ${CMAKE_MATCH_1})
math(EXPR before_last "${chunks} - 1")
if(NOT chunks GREATER 2
   OR NOT out MATCHES "^\\[1/${chunks}\\] [0-9]+\\.[0-9][0-9][0-9][0-9] ± [0-9]+\\.[0-9][0-9][0-9][0-9]\n\\[2/${chunks}\\] "
   OR NOT out MATCHES "\n\\[${before_last}/${chunks}\\] [0-9.]+ ± [0-9.]+\n\\[${chunks}/${chunks}\\] [0-9.]+ ± [0-9.]+\nFinal estimate: PPL = [0-9]+\\.[0-9]+ \\+/- [0-9]+\\.[0-9]+\n$"
   OR NOT err MATCHES "vkformer perplexity: ${chunks} chunks, [0-9]+ tokens scored, in [0-9.]+ s")
  message(SEND_ERROR "perplexity: expected the lines [1/N] .. [N/N] and the final estimate on stdout, the counts on stderr:\n"
                     "stdout:\n${out}\nstderr:\n${err}")
endif()
string(REGEX MATCH "Final estimate: PPL = ([0-9.]+)" _ "${out}")
set(final ${CMAKE_MATCH_1})

# --json: one object on stdout with the same chunks and estimate.
run(--json)
string(JSON n GET "${out}" chunks)
string(JSON n_ppl LENGTH "${out}" chunk_ppl)
string(JSON ctx GET "${out}" context)
string(JSON ppl GET "${out}" ppl)
string(JSON scored GET "${out}" scored_tokens)
math(EXPR want_scored "${chunks} * 7")
# The printed estimate is the JSON's rounded to 4 decimals: their first 2 decimals agree here.
string(REGEX REPLACE "^([0-9]+\\.[0-9][0-9]).*" "\\1" ppl2 "${ppl}")
string(REGEX REPLACE "^([0-9]+\\.[0-9][0-9]).*" "\\1" final2 "${final}")
if(NOT n EQUAL chunks OR NOT n_ppl EQUAL chunks OR NOT ctx EQUAL 16 OR NOT scored EQUAL want_scored
   OR NOT ppl2 STREQUAL final2)
  message(SEND_ERROR "perplexity --json: chunks ${n}, ${n_ppl} running estimates, context ${ctx}, ${scored} scored, "
                     "ppl ${ppl}; expected ${chunks}, ${chunks}, 16, ${want_scored} and the final estimate ${final}:\n${out}")
endif()
# --chunks 2: two lines.
run(--chunks 2)
if(NOT out MATCHES "^\\[1/2\\] [0-9.]+ ± [0-9.]+\n\\[2/2\\] [0-9.]+ ± [0-9.]+\nFinal estimate: PPL = [0-9.]+ \\+/- [0-9.]+\n$")
  message(SEND_ERROR "perplexity --chunks 2: expected two chunks' lines and the final estimate:\n${out}")
endif()

# The command line's mistakes: exit status 2, naming the option.
expect(2 "^vkformer: error: --ctx 8 is too small for perplexity: give at least 16 [^\n]*\n"
       perplexity -m ${model} -f ${OUT}/text.txt -c 8)
expect(2 "^vkformer: error: --ctx 4096 is more than this model's context length \\(256 tokens\\): give --ctx 256 or less"
       perplexity -m ${model} -f ${OUT}/text.txt -c 4096)
expect(2 "^vkformer: error: --chunks: expected a whole number from 1 to 2147483647, got '0'\n"
       perplexity -m ${model} -f ${OUT}/text.txt --chunks 0)
expect(2 "^vkformer: error: --cache-type-k: unknown cache type 'q5_0': expected f32, f16, q8_0 or q4_0\n"
       perplexity -m ${model} -f ${OUT}/text.txt --cache-type-k q5_0)
expect(2 "^vkformer: error: --file is required\n" perplexity -m ${model})
expect(2 "^vkformer: error: --model ${OUT}/text.txt is a file that is not a model"
       perplexity -m ${OUT}/text.txt -f ${OUT}/text.txt)

# The file's problems: exit status 1, naming the file.
expect(1 "^vkformer: error: --file: '${OUT}/missing.txt' does not exist\n"
       perplexity -m ${model} -f ${OUT}/missing.txt)
file(WRITE ${OUT}/empty.txt "")
expect(1 "^vkformer: error: --file ${OUT}/empty.txt is empty: perplexity needs a text of at least two chunks \\(2 x --ctx tokens\\)\n"
       perplexity -m ${model} -f ${OUT}/empty.txt)
# A binary file: the model itself (its version, a little-endian 3, puts a NUL at offset 5).
expect(1 "^vkformer: error: --file ${model} is not text: it holds a NUL byte at offset 5 \\(a binary file\\?\\)\n"
       perplexity -m ${model} -f ${model})
string(ASCII 255 byte_ff)  # never valid in UTF-8
file(WRITE ${OUT}/latin1.txt "caf${byte_ff} au lait")
expect(1 "^vkformer: error: --file ${OUT}/latin1.txt is not valid UTF-8 \\(byte 0xFF at offset 3\\)"
       perplexity -m ${model} -f ${OUT}/latin1.txt)
expect(1 "^vkformer: error: --file: ${OUT}: is a directory, not a regular file\n" perplexity -m ${model} -f ${OUT})
# Shorter than two chunks: how many tokens it has and how many --ctx needs.
file(WRITE ${OUT}/short.txt "The river runs past the old mill.\n")
expect(1 "^vkformer: error: --file ${OUT}/short.txt is too short: it has [0-9]+ tokens for this model, and --ctx 64 needs at least 128 \\(two chunks of 64\\); give a longer text or a smaller --ctx\n"
       perplexity -m ${model} -f ${OUT}/short.txt -c 64)
