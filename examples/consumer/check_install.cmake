# cmake -DBUILD_DIR=<vkformer build> -DWORK_DIR=<scratch> -DCONSUMER_DIR=<this folder>
#       -DC_CONSUMER_DIR=<examples/consumer_c> -DMODEL_DIR=<a seq2seq model> -DEXPECT=<regex>
#       [-DCMAKE_CXX_COMPILER=<c++>] [-DCMAKE_C_COMPILER=<cc>]
#       [-DTOOLCHAIN_FILE=<cross toolchain> -DEXE_SUFFIX=.exe -DLAUNCHER=<emulator>]
#       -P check_install.cmake
# Installs the build into WORK_DIR/prefix, builds the C++ consumer project and the C-only one
# against it with find_package(vkformer CONFIG REQUIRED) and runs them: the C one generates
# tokens with MODEL_DIR, and its output must match EXPECT; then builds that C program once more
# with plain `cc` and the installed vkformer.pc. Any failing step fails the script.
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR C_CONSUMER_DIR MODEL_DIR EXPECT)
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
  list(APPEND compiler_arg -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
endif()
set(c_compiler_arg "")
if(CMAKE_C_COMPILER)
  set(c_compiler_arg -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER})
endif()
# A cross build: the consumers use its toolchain (the prefix as a find root, which the toolchain
# limits packages to) and run through its emulator.
if(TOOLCHAIN_FILE)
  list(APPEND compiler_arg -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE}
       -DCMAKE_FIND_ROOT_PATH=${WORK_DIR}/prefix)
  list(APPEND c_compiler_arg -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE}
       -DCMAKE_FIND_ROOT_PATH=${WORK_DIR}/prefix)
endif()

step("install into ${WORK_DIR}/prefix"
  ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step("configure the consumer with find_package(vkformer)"
  ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${compiler_arg})
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run the consumer" ${LAUNCHER} ${WORK_DIR}/build/app${EXE_SUFFIX})
message(STATUS "consumer said:\n${step_output}")

step("configure the C consumer (LANGUAGES C only)"
  ${CMAKE_COMMAND} -S ${C_CONSUMER_DIR} -B ${WORK_DIR}/build-c -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${c_compiler_arg})
step("build the C consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build-c)
step("run the C consumer" ${LAUNCHER} ${WORK_DIR}/build-c/capp${EXE_SUFFIX} ${MODEL_DIR} 5 17 3 9)
if(NOT step_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the C consumer printed:\n${step_output}\nexpected a match of: ${EXPECT}")
endif()
message(STATUS "C consumer said:\n${step_output}")

# The same C program built without CMake, with the flags of the installed vkformer.pc.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(C_COMPILER NAMES ${CMAKE_C_COMPILER} cc REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${WORK_DIR}/prefix/lib/pkgconfig")
step("pkg-config --cflags --libs vkformer" ${PKG_CONFIG} --cflags --libs vkformer)
string(STRIP "${step_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
# A cross build links the C and C++ runtimes statically, as its toolchain file does: Wine finds
# no MinGW DLLs beside the program.
set(static_runtimes "")
if(TOOLCHAIN_FILE)
  set(static_runtimes -static)
endif()
step("build the C consumer with pkg-config"
  ${C_COMPILER} -std=c99 ${C_CONSUMER_DIR}/../generate.c ${pc_flags} ${static_runtimes}
    -o ${WORK_DIR}/capp-pc${EXE_SUFFIX})
step("run the pkg-config build" ${LAUNCHER} ${WORK_DIR}/capp-pc${EXE_SUFFIX} ${MODEL_DIR} 5 17 3 9)
if(NOT step_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the pkg-config build printed:\n${step_output}\nexpected a match of: ${EXPECT}")
endif()
