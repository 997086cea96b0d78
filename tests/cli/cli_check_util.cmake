# Helpers shared by the tool's checks (tests/cli/check_*.cmake, run with cmake -P).
#
# cli_check_start(<check file name> <variable>...): what each check does first. A missing
# -D<variable>=... fails the check by name; VKFORMER_DEVICE from the caller's environment is
# cleared (a check's devices are its own choice); under a cross build the tool runs through the
# emulator (-DLAUNCHER=wine), so VKFORMER becomes "${LAUNCHER} ${VKFORMER}".
macro(cli_check_start check_name)
  foreach(required ${ARGN})
    if(NOT ${required})
      message(FATAL_ERROR "${check_name}: -D${required}=... is required")
    endif()
  endforeach()
  unset(ENV{VKFORMER_DEVICE})
  set(VKFORMER ${LAUNCHER} ${VKFORMER})
endmacro()
#
# fetch_model(<script> <var>): runs a scripts/fetch_*.sh and sets <var> to the path it prints on
# its last line; a failed fetch fails the check with the script's message.
function(fetch_model script var)
  execute_process(COMMAND ${script} RESULT_VARIABLE rc OUTPUT_VARIABLE path ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    get_filename_component(name "${script}" NAME)
    message(FATAL_ERROR "scripts/${name} failed (exit ${rc}):\n${err}")
  endif()
  string(STRIP "${path}" path)
  string(REGEX REPLACE ".*\n" "" path "${path}")  # its last line
  set(${var} "${path}" PARENT_SCOPE)
endfunction()

# expect(<status> <regex> [STDIN <file>] args...): runs ${VKFORMER} args (with the file on its
# standard input) and checks its exit status and its stdout and stderr together; a mismatch is an
# error that names the command (its first 200 characters) and shows the first 3000 characters of
# the output, and the rest goes on. With EXPECT_TIMEOUT set, a command running longer fails (a
# read blocked on a FIFO would hang the check). The output is left in `last_output`; with
# EXPECT_SEPARATE_STREAMS set, stdout and stderr are read apart, `last_output` is stdout then
# stderr, and `last_stdout` holds stdout alone (for checks of what a command prints).
function(expect status regex)
  set(args ${ARGN})
  set(extra)
  list(LENGTH args n)
  if(n GREATER 1)
    list(GET args 0 first)
    if(first STREQUAL "STDIN")
      list(GET args 1 input)
      list(REMOVE_AT args 0 1)
      set(extra INPUT_FILE ${input})
    endif()
  endif()
  if(EXPECT_TIMEOUT)
    list(APPEND extra TIMEOUT ${EXPECT_TIMEOUT})
  endif()
  if(EXPECT_SEPARATE_STREAMS)
    execute_process(COMMAND ${VKFORMER} ${args} ${extra} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout
                    ERROR_VARIABLE stderr)
    set(out "${stdout}${stderr}")
    set(last_stdout "${stdout}" PARENT_SCOPE)
  else()
    execute_process(COMMAND ${VKFORMER} ${args} ${extra} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE out)
  endif()
  string(JOIN " " cmd ${args})
  string(SUBSTRING "${cmd}" 0 200 cmd)
  string(SUBSTRING "${out}" 0 3000 shown)
  if(NOT rc STREQUAL "${status}")
    message(SEND_ERROR "vkformer ${cmd}: exit status ${rc}, expected ${status}:\n${shown}")
  elseif(NOT out MATCHES "${regex}")
    message(SEND_ERROR "vkformer ${cmd}: output does not match '${regex}':\n${shown}")
  else()
    message(STATUS "vkformer ${cmd}: ok")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
