# cmake -DREPO=<the repository> -P check_docs.cmake
# The README and docs/ agree with what they describe (issue 25):
# - the README's package table lists exactly the packages scripts/install_deps.sh installs;
# - every relative link of the README and docs/*.md names a file that exists, and every page of
#   docs/ is linked from the README;
# - the README's first screen (60 lines) has the two make commands with their times and the three
#   commands to try (chat, embed, generate) with the cached model paths; the exit-status rule is
#   stated once, in the README;
# - `make demo` builds only the library and the tool, and quietly (no line per shader);
# - the model downloads show pip's progress.
if(NOT REPO)
  message(FATAL_ERROR "check_docs.cmake: -DREPO=... is required")
endif()
file(READ ${REPO}/README.md readme)
file(READ ${REPO}/scripts/install_deps.sh deps)

# install_deps.sh: the words of PACKAGES=( ... ).
string(REGEX MATCH "\nPACKAGES=\\(([^)]*)\\)" _ "${deps}")
string(REGEX MATCHALL "[a-z0-9][a-z0-9.+-]+" script_packages "${CMAKE_MATCH_1}")
# The README: `name` words in the first column of the rows after "| packages | what for |".
string(REGEX MATCH "\\| packages \\| what for \\|\n\\|---\\|---\\|\n((\\|[^\n]*\n)+)" _ "${readme}")
set(table "${CMAKE_MATCH_1}")
if(table STREQUAL "")
  message(SEND_ERROR "README.md: no package table (| packages | what for |)")
endif()
set(readme_packages)
string(REGEX MATCHALL "\n?\\| [^|]*\\|" first_cells "\n${table}")
foreach(cell IN LISTS first_cells)
  string(REGEX MATCHALL "`[^`]+`" words "${cell}")
  foreach(w IN LISTS words)
    string(REPLACE "`" "" w "${w}")
    separate_arguments(names UNIX_COMMAND "${w}")
    list(APPEND readme_packages ${names})
  endforeach()
endforeach()
list(SORT script_packages)
list(SORT readme_packages)
if(NOT script_packages STREQUAL readme_packages)
  message(SEND_ERROR "README.md's package table lists ${readme_packages}\nbut scripts/install_deps.sh installs ${script_packages}")
else()
  list(LENGTH script_packages n)
  message(STATUS "package table: the ${n} packages of install_deps.sh")
endif()

# Links.
file(GLOB pages ${REPO}/docs/*.md)
foreach(page ${REPO}/README.md ${pages})
  file(READ ${page} text)
  string(REGEX REPLACE "```[^`]*```" "" text "${text}")  # code is not links
  get_filename_component(dir ${page} DIRECTORY)
  string(REGEX MATCHALL "\\]\\([^)# ]+" links "${text}")
  # Without the "](": CMake lists do not split inside square brackets.
  string(REPLACE "](" "" links "${links}")
  foreach(target IN LISTS links)
    if(target MATCHES "^(https?|mailto):")
      continue()
    endif()
    if(NOT EXISTS ${dir}/${target})
      file(RELATIVE_PATH rel ${REPO} ${page})
      message(SEND_ERROR "${rel}: the link '${target}' names no file")
    endif()
  endforeach()
endforeach()
foreach(page ${pages})
  get_filename_component(name ${page} NAME)
  string(FIND "${readme}" "(docs/${name})" at)
  if(at LESS 0)
    message(SEND_ERROR "README.md does not link docs/${name}")
  endif()
endforeach()

# The first screen.
set(screen "${readme}")
set(rest "${readme}")
set(length 0)
foreach(i RANGE 1 60)
  string(FIND "${rest}" "\n" at)
  if(at LESS 0)
    break()
  endif()
  math(EXPR at "${at} + 1")
  math(EXPR length "${length} + ${at}")
  string(SUBSTRING "${rest}" ${at} -1 rest)
endforeach()
string(SUBSTRING "${readme}" 0 ${length} screen)
foreach(want "make demo [^\n]*min" "make test [^\n]*min"
        "vkformer chat -m ~/.cache/vkformer/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
        "vkformer embed -m ~/.cache/vkformer/all-MiniLM-L6-v2/model"
        "vkformer generate -m ~/.cache/vkformer/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
  if(NOT screen MATCHES "${want}")
    message(SEND_ERROR "README.md's first 60 lines lack '${want}'")
  endif()
endforeach()
# The rule once: no page restates exit statuses of its own.
string(REGEX MATCHALL "exits with 0 on success" rules "${readme}")
list(LENGTH rules n)
if(NOT n EQUAL 1)
  message(SEND_ERROR "README.md states the exit-status rule ${n} times, expected once")
endif()
foreach(page ${pages})
  file(READ ${page} text)
  if(text MATCHES "[Ee]xit status: 0|1 for an error, 2 for")
    message(SEND_ERROR "${page} states an exit-status rule of its own; link README.md#exit-status instead")
  endif()
endforeach()

# make demo's targets: the tool (and so the library), nothing else.
file(READ ${REPO}/Makefile makefile)
string(REGEX MATCH "\nDEMO_TARGETS := ([^\n]*)" _ "${makefile}")
if(NOT CMAKE_MATCH_1 STREQUAL "vkformer_cli")
  message(SEND_ERROR "Makefile: DEMO_TARGETS is '${CMAKE_MATCH_1}', expected only vkformer_cli")
endif()
if(NOT makefile MATCHES "\ndemo: configure\n[^\n]*\n\t[$][(]CMAKE[)] --build [^\n]*--target [$][(]DEMO_TARGETS[)]")
  message(SEND_ERROR "Makefile: demo does not build --target $(DEMO_TARGETS) (a plain build makes every test)")
endif()

# The model downloads show pip's progress (they ran pip -q: minutes of silence). A stand-in
# python3 records how pip is called and fails the download, so nothing is fetched.
if(NOT CMAKE_HOST_WIN32)
  set(stub ${CMAKE_CURRENT_BINARY_DIR}/docs_stub)
  file(REMOVE_RECURSE ${stub})
  file(MAKE_DIRECTORY ${stub}/bin)
  file(WRITE ${stub}/bin/python3 "#!/bin/sh\n[ \"$3\" = --version ] && exit 0\necho \"pip called as: $*\" >&2\nexit 1\n")
  file(CHMOD ${stub}/bin/python3 PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  foreach(script fetch_minilm.sh fetch_smollm2.sh)
    execute_process(COMMAND env PATH=${stub}/bin:$ENV{PATH} VKFORMER_CACHE_DIR=${stub}/cache
                            ${REPO}/scripts/${script}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT err MATCHES "pip called as: -m pip download " OR err MATCHES "pip called as: [^\n]* -q ")
      message(SEND_ERROR "scripts/${script} should run pip download without -q (its progress shows):\n${err}")
    endif()
  endforeach()
endif()

# make demo is quiet: the shader build echoes no path per kernel (glslang prints the file it
# compiles unless --quiet; CMake prints a COMMENT per command).
file(READ ${REPO}/cmake/VkformerShaders.cmake shaders)
if(NOT shaders MATCHES "COMMAND [$]{VKF_GLSLANG} --quiet -V [^)]*COMMENT \"\"")
  message(SEND_ERROR "cmake/VkformerShaders.cmake: the kernels' glslang command should run with --quiet and COMMENT \"\"")
endif()
