# cmake -DVKFORMER=<vkformer tool> -DNPY_COMPARE=<npy_compare> -DGOLDEN=<tests/golden>
#       -DOUT=<scratch directory> -P check_models.cmake
# `vkformer run` and `vkformer generate` on the PyTorch fixtures of tests/golden, driven by each
# case's case.json: every written output against expected.npy, every recorded decoding against
# the printed tokens, and the errors people hit first. Needs one Vulkan device (lavapipe will do).
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_models.cmake VKFORMER NPY_COMPARE GOLDEN OUT)
set(NPY_COMPARE ${LAUNCHER} ${NPY_COMPARE})
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")

set(EXPECT_SEPARATE_STREAMS ON)  # expect() (cli_check_util.cmake) leaves stdout in last_stdout

function(compare got want tolerance)
  execute_process(COMMAND ${NPY_COMPARE} ${got} ${want} ${tolerance} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(STRIP "${out}" out)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "${got} vs ${want}: ${out}")
  else()
    message(STATUS "  ${out}")
  endif()
endfunction()

# ---------------------------------------------------------------------------- run
# The command line for a case: --input and --memory (decoder) or --target (transformer, seq2seq)
# by architecture, each mask by its option
# ("causal" -> --causal), as the case's case.json lists them.
function(case_args name out_var)
  set(dir "${GOLDEN}/${name}")
  file(READ "${dir}/config.json" config)
  file(READ "${dir}/case.json" meta)
  string(JSON arch GET "${config}" arch)
  set(memory "")
  set(second_option --target)
  if(arch STREQUAL "encoder")
    set(input src)
  elseif(arch STREQUAL "decoder")
    set(input tgt)
    set(memory memory)
    set(second_option --memory)
  elseif(arch STREQUAL "transformer")
    set(input src)
    set(memory tgt)
  else()
    set(input src_ids)
    set(memory tgt_ids)
  endif()
  string(JSON file GET "${meta}" inputs ${input})
  set(args --model "${dir}" --input "${dir}/${file}")
  if(memory)
    string(JSON file GET "${meta}" inputs ${memory})
    list(APPEND args ${second_option} "${dir}/${file}")
  endif()
  foreach(mask src_mask tgt_mask memory_mask src_key_padding_mask tgt_key_padding_mask
               memory_key_padding_mask)
    string(JSON file ERROR_VARIABLE missing GET "${meta}" inputs ${mask})
    if(missing)
      continue()
    endif()
    if(file STREQUAL "causal")
      list(APPEND args --causal)
    else()
      string(REPLACE "_" "-" option "--${mask}")
      list(APPEND args ${option} "${dir}/${file}")
    endif()
  endforeach()
  set(${out_var} ${args} PARENT_SCOPE)
endfunction()

file(GLOB cases RELATIVE "${GOLDEN}" "${GOLDEN}/*/case.json")
set(ran 0)
foreach(case_json ${cases})
  get_filename_component(name "${case_json}" DIRECTORY)
  file(READ "${GOLDEN}/${case_json}" meta)
  string(JSON weights GET "${meta}" weights)
  if(weights STREQUAL "synthetic")  # no weights file: tests/model_test.cpp makes them
    continue()
  endif()
  case_args(${name} args)
  string(JSON expected GET "${meta}" expected)
  expect(0 "output +\\[[0-9,]+\\].*written as float32.*first run" run ${args} --output "${OUT}/${name}.npy")
  compare("${OUT}/${name}.npy" "${GOLDEN}/${name}/${expected}" 1e-4)
  math(EXPR ran "${ran} + 1")
endforeach()
if(ran LESS 4)
  message(SEND_ERROR "only ${ran} golden cases found under ${GOLDEN}")
endif()

# f16 on the device, written as float16; and replays.
set(name encoder_post_relu_b3_s7_padding)
case_args(${name} args)
expect(0 "written as float16" run ${args} --dtype f16 --output-dtype f16 --output "${OUT}/f16.npy")
compare("${OUT}/f16.npy" "${GOLDEN}/${name}/expected.npy" 2e-2)
expect(0 "replays +3, median [0-9.]+ m?s" run ${args} --repeat 3 --output "${OUT}/repeat.npy")
compare("${OUT}/repeat.npy" "${GOLDEN}/${name}/expected.npy" 1e-4)

# ---------------------------------------------------------------------------- generate
set(dir "${GOLDEN}/seq2seq_small")
file(READ "${dir}/case.json" meta)
string(JSON steps GET "${meta}" decoding steps)
string(JSON bos GET "${meta}" decoding bos)
string(JSON eos GET "${meta}" decoding eos)
string(JSON beam GET "${meta}" decoding beam)
string(JSON alpha GET "${meta}" decoding alpha)
string(JSON n_results LENGTH "${meta}" decoding results)
math(EXPR last "${n_results} - 1")
foreach(i RANGE ${last})
  string(JSON src_json GET "${meta}" decoding results ${i} src)
  string(REGEX REPLACE "[][ \n]" "" src "${src_json}")
  foreach(variant "greedy;1;-1" "greedy_eos;1;${eos}" "beam;${beam};-1" "beam_eos;${beam};${eos}")
    list(GET variant 0 key)
    list(GET variant 1 k)
    list(GET variant 2 e)
    string(JSON tokens GET "${meta}" decoding results ${i} ${key})
    string(REGEX REPLACE "[][\n ]" "" tokens "${tokens}")
    string(REPLACE "," " " tokens "${tokens}")
    expect(0 "tokens" generate --model "${dir}" --src ${src} --beam ${k} --eos ${e} --bos ${bos}
           --max-len ${steps} --length-penalty ${alpha})
    if(NOT last_stdout STREQUAL "${tokens}\n")
      message(SEND_ERROR "generate --src ${src} (${key}): printed '${last_stdout}', expected '${tokens}'")
    endif()
  endforeach()
endforeach()
# The defaults are the fixture's settings: greedy, eos 2, 32 tokens.
string(JSON tokens GET "${meta}" decoding results 0 greedy_eos)
string(REGEX REPLACE "[][\n ]" "" tokens "${tokens}")
string(REPLACE "," " " tokens "${tokens}")
expect(0 "search +greedy.*per decoder step" generate --model "${dir}" --src "5, 17 ,3,9" --verbose)
if(NOT last_stdout STREQUAL "${tokens}\n")
  message(SEND_ERROR "generate with defaults: printed '${last_stdout}', expected '${tokens}'")
endif()

# ---------------------------------------------------------------------------- errors
set(enc "${GOLDEN}/encoder_post_relu_b3_s7_padding")
set(dec "${GOLDEN}/decoder_post_relu_b3_t7_s5")
set(tr "${GOLDEN}/transformer_post_relu_b3_s11_t7")
set(y "${OUT}/error.npy")
# The summary names what each array is (an integer mask is a boolean one).
expect(0 "mask +src_key_padding_mask boolean \\[3,7\\]"
       run --model ${enc} --input ${enc}/src.npy --src-key-padding-mask ${enc}/src_key_padding_mask.npy --output ${y})
expect(2 "vkformer: error: a decoder model needs --memory" run --model ${dec} --input ${dec}/tgt.npy --output ${y})
expect(2 "vkformer: error: a transformer model needs --target \\(or --memory\\)" run --model ${tr} --input ${tr}/src.npy --output ${y})
expect(2 "vkformer: error: --target is for transformer and seq2seq models; .* is a decoder, whose target is --input"
       run --model ${dec} --input ${dec}/tgt.npy --target ${dec}/tgt.npy --output ${y})
expect(2 "vkformer: error: --target and --memory both name the target of a transformer model"
       run --model ${tr} --input ${tr}/src.npy --target ${tr}/tgt.npy --memory ${tr}/tgt.npy --output ${y})
expect(2 "vkformer: error: --memory is for decoder.*is an encoder"
       run --model ${enc} --input ${enc}/src.npy --memory ${enc}/src.npy --output ${y})
expect(1 "vkformer: error: --input .*no_such.npy: cannot open"
       run --model ${enc} --input ${enc}/no_such.npy --output ${y})
expect(1 "vkformer: error: --input .*config.json: not a .npy file"
       run --model ${enc} --input ${enc}/config.json --output ${y})
expect(1 "vkformer: error: --input .*src_key_padding_mask.npy: the encoder input must be a float array \\[batch, seq, 32\\] \\(d_model 32\\), got integer \\[3,7\\]"
       run --model ${enc} --input ${enc}/src_key_padding_mask.npy --output ${y})
expect(1 "vkformer: error: --memory .*src.npy: the memory \\(encoder output\\) must be a float array \\[3, seq, 32\\]"
       run --model ${dec} --input ${dec}/tgt.npy --memory ${GOLDEN}/encoder_post_gelu_b1_s7_causal_eps/src.npy --output ${y})
expect(1 "vkformer: error: --src-key-padding-mask .*: expected a boolean mask \\[3, 7\\] \\(batch, source; true = ignore\\), got integer \\[3,11\\]"
       run --model ${enc} --input ${enc}/src.npy --src-key-padding-mask ${tr}/src_key_padding_mask.npy --output ${y})
expect(2 "vkformer: error: --tgt-mask is for a target or memory; an encoder model has neither"
       run --model ${enc} --input ${enc}/src.npy --tgt-mask ${enc}/src.npy --output ${y})
expect(1 "vkformer: error: --model: '.*no_such_model' does not exist"
       run --model ${OUT}/no_such_model --input ${enc}/src.npy --output ${y})
expect(1 "vkformer: error: --output: .*cannot open"
       run --model ${enc} --input ${enc}/src.npy --output ${OUT}/no_such_dir/y.npy)
# Target ids are drawn from [3, 48): some lie outside the source vocabulary [0, 40).
expect(1 "vkformer: error: --input .*tgt_ids.npy: token id 4[0-7] at \\[[0-9],[0-9]\\] is outside the vocabulary \\[0, 40\\)"
       run --model ${dir} --input ${dir}/tgt_ids.npy --memory ${dir}/tgt_ids.npy --output ${y})
expect(1 "vkformer: error: --memory .*src_ids.npy: the target of a seq2seq model must be integer token ids \\[3, seq\\], got integer \\[2,6\\]"
       run --model ${dir} --input ${dec}/tgt_key_padding_mask.npy --memory ${dir}/src_ids.npy --output ${y})
expect(2 "vkformer: error: .*--output" run --model ${enc} --input ${enc}/src.npy)
expect(2 "vkformer: error: --src: 'x' is not a token id" generate --model ${dir} --src 5,x,3)
expect(2 "vkformer: error: --src: an empty id" generate --model ${dir} --src 5,,3)
expect(2 "vkformer: error: --src: token 40 at position 1 is outside the source vocabulary \\[0, 40\\)"
       generate --model ${dir} --src 5,40)
expect(2 "vkformer: error: --eos 48 is outside the target vocabulary \\[0, 48\\)"
       generate --model ${dir} --src 5 --eos 48)
expect(2 "vkformer: error: --max-len is 129, expected 1..128" generate --model ${dir} --src 5 --max-len 129)
expect(2 "vkformer: error: generate needs a seq2seq model; .* is an encoder"
       generate --model ${enc} --src 5,17)
expect(1 "vkformer: error: --model: '.*no_such_model' does not exist"
       generate --model ${OUT}/no_such_model --src 5)

# ---------------------------------------------------------------------------- help
expect(0 "run.*generate" --help)
expect(0 "--model DIR.*--dtype.*default: f32.*--input.*--memory.*--output.*--output-dtype.*--causal.*--src-mask.*--tgt-mask.*--memory-mask.*--src-key-padding-mask.*--tgt-key-padding-mask.*--memory-key-padding-mask.*--repeat.*default: 0"
       run --help)
expect(0 "--model FILE.gguf\\|DIR.*--dtype.*--src.*--beam.*default: 1.*--max-len.*default: 32.*--bos.*default: 1.*--eos.*default: 2.*--length-penalty.*default: 0.6.*--verbose"
       generate --help)
