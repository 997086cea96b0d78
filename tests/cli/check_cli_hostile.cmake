# cmake -DVKFORMER=<tool> -DGOLDEN=<tests/golden> -DOUT=<scratch dir> -P check_cli_hostile.cmake
# The tool against hostile paths and arguments (issue 11): each case once crashed, hung, ran out
# of memory, replaced a file it should not have touched, or printed a wrong or useless message.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_cli_hostile.cmake VKFORMER GOLDEN OUT)
# The Windows tool (run by Wine on this Linux host) joins paths with '\', calls a FIFO a named
# pipe and a link loop error 1921, cannot see Unix symbolic links (Wine follows them), and
# takes command lines of at most 32,767 characters.
if(TARGET_SYSTEM STREQUAL "Windows")
  set(sep "[/\\]")
  set(fifo "a named pipe")
  set(link_loop "[^\n]*\\(error 1921\\)")
  set(parens 15000)
else()
  set(sep "/")
  set(fifo "a FIFO")
  set(link_loop "Too many levels of symbolic links")
  set(parens 30000)
endif()
set(model ${GOLDEN}/encoder_post_relu_b1_s1)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

set(EXPECT_TIMEOUT 60)  # no case may take longer

# check(<message> <condition...>): a failure with the message unless the condition holds.
function(check what)
  if(NOT (${ARGN}))
    message(SEND_ERROR "${what}")
  endif()
endfunction()

# A model directory with the fixture's weights and the given config.json text.
function(model_with_config dir text)
  file(MAKE_DIRECTORY ${dir})
  file(COPY ${model}/model.safetensors DESTINATION ${dir})
  file(WRITE ${dir}/config.json "${text}")
endfunction()

# --------------------------------------------------------------------------- config.json

# 80,000 nested brackets: the error message printed the value recursively and overflowed the stack.
string(REPEAT "[" 80000 open)
string(REPEAT "]" 80000 close)
model_with_config(${OUT}/deep "{\"arch\": ${open}${close}}")
expect(1 "vkformer: error: --model: .*deep${sep}config.json: arrays and objects nested more than 64 deep"
       run --model ${OUT}/deep --input ${model}/src.npy --output ${OUT}/y.npy)

file(READ ${model}/config.json config)
string(REGEX REPLACE "\"d_model\": *[0-9]+" "\"d_model\": 18446744073709551615" huge "${config}")
model_with_config(${OUT}/huge "${huge}")
expect(1 "\"d_model\" is 18446744073709551615, expected 1\\.\\.1048576"
       run --model ${OUT}/huge --input ${model}/src.npy --output ${OUT}/y.npy)

# A FIFO hung forever, a link to /dev/zero read until memory ran out, a directory was "unexpected
# end of input".
file(MAKE_DIRECTORY ${OUT}/fifo_config)
file(COPY ${model}/model.safetensors DESTINATION ${OUT}/fifo_config)
execute_process(COMMAND mkfifo ${OUT}/fifo_config/config.json RESULT_VARIABLE rc)
check("mkfifo failed" rc EQUAL 0)
expect(1 "fifo_config${sep}config.json: is ${fifo}, not a regular file"
       run --model ${OUT}/fifo_config --input ${model}/src.npy --output ${OUT}/y.npy)

file(MAKE_DIRECTORY ${OUT}/zero_config)
file(CREATE_LINK /dev/zero ${OUT}/zero_config/config.json SYMBOLIC)
expect(1 "zero_config${sep}config.json: is a character device, not a regular file"
       run --model ${OUT}/zero_config --input ${model}/src.npy --output ${OUT}/y.npy)

file(MAKE_DIRECTORY ${OUT}/dir_config/config.json)
expect(1 "dir_config${sep}config.json: is a directory, not a regular file"
       run --model ${OUT}/dir_config --input ${model}/src.npy --output ${OUT}/y.npy)

# --------------------------------------------------------------------------- model.safetensors

# A link loop ended as "internal: filesystem error ... (please report this)".
file(MAKE_DIRECTORY ${OUT}/loop)
file(COPY ${model}/config.json DESTINATION ${OUT}/loop)
file(CREATE_LINK loop_b ${OUT}/loop/loop_a SYMBOLIC)
file(CREATE_LINK loop_a ${OUT}/loop/loop_b SYMBOLIC)
file(CREATE_LINK loop_a ${OUT}/loop/model.safetensors SYMBOLIC)
expect(1 "vkformer: error: [^\n]*loop${sep}model.safetensors: cannot access: ${link_loop}"
       run --model ${OUT}/loop --input ${model}/src.npy --output ${OUT}/y.npy)
check("a link loop is reported as an internal error" NOT last_output MATCHES "internal")

# --------------------------------------------------------------------------- --output

# A link or a device node was replaced by a regular file (as root, --output /dev/null replaced
# /dev/null), and --output equal to an input overwrote it. A FIFO stands in for /dev/null here.
file(COPY ${model}/src.npy DESTINATION ${OUT}/io)
file(SHA256 ${OUT}/io/src.npy src_hash)
file(WRITE ${OUT}/io/target.npy "keep")
if(TARGET_SYSTEM STREQUAL "Windows")
  # No link a Windows program could see: a device name (nul.npy is NUL) instead.
  set(link_name nul.npy)
  set(link_error "is a character device, not a regular file; vkformer writes only regular files")
else()
  file(CREATE_LINK target.npy ${OUT}/io/link.npy SYMBOLIC)
  set(link_name link.npy)
  set(link_error "is a symbolic link; vkformer does not write through links")
endif()
# Still the link (or no file under the device's name).
function(check_link_kept what)
  if(TARGET_SYSTEM STREQUAL "Windows")
    check("${what}" NOT EXISTS ${OUT}/io/nul.npy)
  else()
    check("${what}" IS_SYMLINK ${OUT}/io/link.npy)
  endif()
endfunction()
expect(1 "vkformer: error: --output: [^\n]*io/${link_name} ${link_error}"
       run --model ${model} --input ${OUT}/io/src.npy --output ${OUT}/io/${link_name})
check_link_kept("--output replaced a symbolic link")
file(READ ${OUT}/io/target.npy target)
check("--output wrote through a symbolic link" target STREQUAL "keep")

execute_process(COMMAND mkfifo ${OUT}/io/fifo.npy)
expect(1 "vkformer: error: --output: [^\n]*io/fifo.npy is ${fifo}, not a regular file"
       run --model ${model} --input ${OUT}/io/src.npy --output ${OUT}/io/fifo.npy)
execute_process(COMMAND test -p ${OUT}/io/fifo.npy RESULT_VARIABLE still_fifo)
check("--output replaced a FIFO" still_fifo EQUAL 0)

expect(2 "--output [^\n]*io/src.npy is the same file as --input [^\n]*io/src.npy: writing the output would overwrite that input"
       run --model ${model} --input ${OUT}/io/src.npy --output ${OUT}/io/src.npy)
file(CREATE_LINK ${OUT}/io/src.npy ${OUT}/io/hard.npy)  # a hard link: another name, same file
expect(2 "--output [^\n]*io/hard.npy is the same file as --input"
       run --model ${model} --input ${OUT}/io/src.npy --output ${OUT}/io/hard.npy)
file(SHA256 ${OUT}/io/src.npy src_hash_after)
check("--output overwrote the input" src_hash STREQUAL src_hash_after)

expect(0 "written as float32" run --model ${model} --input ${OUT}/io/src.npy --output ${OUT}/io/y.npy)

# bench --json wrote through a symbolic link and blocked on a FIFO.
expect(1 "vkformer: error: --json: [^\n]*io/${link_name} ${link_error}"
       bench --quick --no-peak --filter "^layer_norm" --json ${OUT}/io/${link_name})
check_link_kept("--json wrote through a symbolic link")
expect(1 "vkformer: error: --json: [^\n]*io/fifo.npy is ${fifo}, not a regular file"
       bench --quick --no-peak --filter "^layer_norm" --json ${OUT}/io/fifo.npy)

# --------------------------------------------------------------------------- arguments

# --device "" was silently the default device. (Passed literally: a list would drop the "".)
execute_process(COMMAND ${VKFORMER} --device "" devices RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out TIMEOUT 60)
check("vkformer --device '' devices: status ${rc}, expected 2 and 'empty device spec':\n${out}"
      rc EQUAL 2 AND out MATCHES "vkformer: error: --device: empty device spec")

# The range of --repeats was printed with a 300-digit bound.
expect(2 "vkformer: error: --repeats: expected a whole number from 1 to 1000000, got '0'"
       bench --repeats 0)
string(LENGTH "${last_output}" n)
check("bench --repeats 0: a ${n}-character message" n LESS 200)
expect(2 "vkformer: error: --warmup: expected a whole number from 0 to 1000000, got '-1'"
       bench --warmup -1)
expect(2 "vkformer: error: --budget: expected a number of seconds above 0 and at most 1000000, got '0'"
       bench --budget 0)

# 30,000 nested parentheses overflowed the stack in std::regex; RE2 takes them. (15,000 on
# Windows, whose command line holds 32,767 characters and whose stack is 1 MiB.)
string(REPEAT "(" ${parens} open)
string(REPEAT ")" ${parens} close)
expect(0 "layer_norm/affine/f32" bench --quick --list --filter "${open}layer_norm${close}")
expect(1 "vkformer: error: --filter '\\(\\(\\(\\(.*\\.\\.\\.' \\(${parens} characters\\) is not a valid regular expression: missing \\)"
       bench --list --filter "${open}")
expect(1 "vkformer: error: --filter '\\(' is not a valid regular expression: missing \\)" bench --list --filter "(")
expect(0 "attention/fused/f32.*attention/unfused/f32" bench --quick --list --filter "^attention/(fused|unfused)/f32")
