# cmake -DVKFORMER=<the vkformer tool> -DFAMILIES=<tests/golden_families> -DTINY=<tests/golden_llama/tiny>
#       -DREPO=<the repository> -DOUT=<scratch dir> -P check_speculative_cli.cmake
# Speculative decoding on the command line (issue 38): `generate --spec ngram` and
# `--model-draft` print the text plain greedy decoding prints (llama3's tiny model, its Q8_0 file
# drafting) with the acceptance on stderr; `bench --model --spec` reports the same tokens; every
# bad input is one line: exit status 2 for the command line's mistakes (--draft-max 0 or 64, an
# unknown --spec, --spec draft without a draft, a draft that is no GGUF file or is missing), 1
# for a draft of another vocabulary or an unsupported file.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_speculative_cli.cmake VKFORMER FAMILIES TINY REPO OUT)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(target ${FAMILIES}/llama3.f32.gguf)
set(draft ${FAMILIES}/llama3.q8_0.gguf)

function(greedy_stdout var)
  execute_process(COMMAND ${VKFORMER} generate --model ${target} --prompt "ab ab ab ab" -n 24 --ctx 128 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "generate ${ARGN}: exit status ${rc}:\n${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
  set(${var}_err "${err}" PARENT_SCOPE)
endfunction()

greedy_stdout(plain)
greedy_stdout(lookup --spec ngram --draft-max 6)
greedy_stdout(drafted --model-draft ${draft} --draft-max 6 --draft-p-min 0)
foreach(v lookup drafted)
  if(NOT "${${v}}" STREQUAL "${plain}")
    message(SEND_ERROR "generate (${v}): the text differs from plain greedy decoding's:\n[${${v}}]\n[${plain}]")
  else()
    message(STATUS "generate (${v}): the same text as plain decoding")
  endif()
endforeach()
if(NOT drafted_err MATCHES "speculation: [0-9]+ drafted, [0-9]+ accepted")
  message(SEND_ERROR "generate --model-draft: no speculation line on stderr:\n${drafted_err}")
endif()

file(WRITE ${OUT}/prompt.txt "ab ab ab ab cd cd")
expect(0 "\\| prompt\\.txt +\\| +[0-9]+ \\|.*\\| +yes \\|"
       bench --model ${target} --model-draft ${draft} --spec-prompt ${OUT}/prompt.txt -n 8 -r 1)

set(run generate --model ${target} --prompt hello -n 4 --ctx 128)
expect(2 "^vkformer: error: --draft-max must be in 1\\.\\.63 \\(tokens verified in one pass\\), got 0\n" ${run} --spec ngram --draft-max 0)
expect(2 "^vkformer: error: --draft-max must be in 1\\.\\.63 \\(tokens verified in one pass\\), got 64\n" ${run} --spec ngram --draft-max 64)
expect(2 "^vkformer: error: --spec must be ngram or draft, got 'fast'\n" ${run} --spec fast)
expect(2 "^vkformer: error: --spec draft needs --model-draft FILE\\.gguf\n" ${run} --spec draft)
expect(2 "^vkformer: error: --draft-min must be at most --draft-max \\(4\\), got 5\n" ${run} --spec ngram --draft-max 4 --draft-min 5)
expect(2 "^vkformer: error: --model-draft ${OUT}/none\\.gguf: no such file\n" ${run} --model-draft ${OUT}/none.gguf)
expect(2 "^vkformer: error: --model-draft ${OUT}/prompt\\.txt is not a GGUF file" ${run} --model-draft ${OUT}/prompt.txt)
expect(1 "^vkformer: error: --model-draft [^\n]*tiny_llama_tied\\.gguf: draft model: its vocabulary is not the target's: 384 tokens, the target has 320\n"
       ${run} --model-draft ${TINY}/tiny_llama_tied.gguf)
expect(1 "^vkformer: error: --model-draft [^\n]*all_types\\.gguf: general\\.architecture is 'testarch'"
       ${run} --model-draft ${REPO}/tests/golden_gguf/all_types.gguf)
