# Cross-compiling vkformer for 64-bit Windows with MinGW-w64 on Linux (Debian:
# g++-mingw-w64-x86-64-posix; the posix variant for std::thread and std::mutex). Used by
# scripts/test_windows.sh, which also builds the third-party libraries into a prefix and passes it
# as CMAKE_PREFIX_PATH; shaders are still compiled by the host's glslangValidator.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(VKF_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${VKF_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${VKF_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${VKF_MINGW_TRIPLE}-windres)
set(CMAKE_AR ${VKF_MINGW_TRIPLE}-gcc-ar-posix CACHE FILEPATH "")
set(CMAKE_RANLIB ${VKF_MINGW_TRIPLE}-gcc-ranlib-posix CACHE FILEPATH "")

# Libraries and headers come only from the MinGW sysroot and the prefixes given in
# CMAKE_PREFIX_PATH / CMAKE_FIND_ROOT_PATH, never from the host's /usr; programs (glslang,
# python) from the host.
list(APPEND CMAKE_FIND_ROOT_PATH /usr/${VKF_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The C and C++ runtimes linked statically: the .exe files run without MinGW's DLLs beside them.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc -static-libstdc++")

# Test executables run under Wine (ctest and gtest_discover_tests use this), through
# scripts/windows/wine_run.sh, which keeps Wine's helper processes off the tests' output pipes.
find_program(VKF_WINE NAMES wine wine64 PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
if(VKF_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/../../scripts/windows/wine_run.sh)
endif()
