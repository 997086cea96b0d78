# cmake -DSOURCE_DIR=<repository> -P check_sync_primitives.cmake
# Fails if code that is built for Windows uses std::latch, std::barrier, std::counting_semaphore
# (binary_semaphore) or the atomic wait/notify functions: on targets without a futex (MinGW-w64)
# libstdc++ builds them on a shared pool of mutexes and condition variables, and GCC 12's (Debian's
# MinGW-w64 compiler) loses wake-ups there, which hung `make test-windows` under load (issue 26;
# tests/latch.hpp says how). Use a mutex and a condition variable (tests/latch.hpp) instead.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_sync_primitives.cmake: -DSOURCE_DIR=... is required")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../repo_check_util.cmake)
set(patterns "std::latch" "std::barrier" "counting_semaphore" "binary_semaphore" "atomic_wait"
             "atomic_notify" "atomic_flag_wait" "#include <latch>" "#include <barrier>" "#include <semaphore>")
file(GLOB_RECURSE files
     ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.hpp ${SOURCE_DIR}/src/*.h
     ${SOURCE_DIR}/include/*.hpp ${SOURCE_DIR}/include/*.h
     ${SOURCE_DIR}/tests/*.cpp ${SOURCE_DIR}/tests/*.hpp
     ${SOURCE_DIR}/tools/*.cpp ${SOURCE_DIR}/tools/*.hpp
     ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/bench/*.hpp
     ${SOURCE_DIR}/reference/*.cpp ${SOURCE_DIR}/reference/*.hpp
     ${SOURCE_DIR}/examples/*.cpp ${SOURCE_DIR}/examples/*.c ${SOURCE_DIR}/fuzz/*.cpp)
# The latch's own header explains the bug by naming them.
list(FILTER files EXCLUDE REGEX "/tests/latch\\.hpp$")
repo_check_files(check_sync_primitives.cmake files 100 source)
set(found "")
foreach(f IN LISTS files)
  file(READ "${f}" text)
  foreach(p IN LISTS patterns)
    string(FIND "${text}" "${p}" at)
    if(NOT at EQUAL -1)
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      string(APPEND found "\n  ${rel}: ${p}")
    endif()
  endforeach()
endforeach()
repo_check_verdict("${found}" "primitives that hang under MinGW-w64's libstdc++ (see tests/latch.hpp)"
                   "${count} files: no std::latch, std::barrier, semaphores or atomic waits")
