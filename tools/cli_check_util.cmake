# Helpers shared by the tool's checks (tools/check_*.cmake, run with cmake -P).
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

# expect(<status> <regex> args...): runs ${VKFORMER} args and checks its exit status and its
# stdout and stderr together; a mismatch is an error that names the command, the rest goes on.
# The output is left in `last_output` for further checks.
function(expect status regex)
  execute_process(COMMAND ${VKFORMER} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  string(JOIN " " cmd ${ARGN})
  if(NOT rc STREQUAL "${status}")
    message(SEND_ERROR "vkformer ${cmd}: exit status ${rc}, expected ${status}:\n${out}")
  elseif(NOT out MATCHES "${regex}")
    message(SEND_ERROR "vkformer ${cmd}: output does not match '${regex}':\n${out}")
  else()
    message(STATUS "vkformer ${cmd}: ok")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
