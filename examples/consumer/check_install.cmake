# cmake -DBUILD_DIR=<vkformer build> -DWORK_DIR=<scratch> -DCONSUMER_DIR=<this folder>
#       [-DCMAKE_CXX_COMPILER=<c++>] -P check_install.cmake
# Installs the build into WORK_DIR/prefix, builds the consumer project against it with
# find_package(vkformer CONFIG REQUIRED) and runs it. Any failing step fails the script.
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "check_install.cmake: -D${var}=... is required")
  endif()
endforeach()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(compiler_arg "")
if(CMAKE_CXX_COMPILER)
  set(compiler_arg -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
endif()

step("install into ${WORK_DIR}/prefix"
  ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step("configure the consumer with find_package(vkformer)"
  ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${compiler_arg})
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run the consumer" ${WORK_DIR}/build/app)
message(STATUS "consumer said:\n${step_output}")
