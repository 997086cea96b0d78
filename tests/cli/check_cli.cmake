# cmake -DVKFORMER=<path to the vkformer tool> -P check_cli.cmake
# Runs the tool the way people and scripts do and checks exit statuses, messages and the JSON
# keys that scripts rely on. Needs one Vulkan device (lavapipe will do).
if(NOT VKFORMER)
  message(FATAL_ERROR "check_cli.cmake: -DVKFORMER=<path to the vkformer tool> is required")
endif()
# The checks choose devices themselves.
unset(ENV{VKFORMER_DEVICE})
# Under a cross build the programs run through the emulator (-DLAUNCHER=wine).
set(VKFORMER ${LAUNCHER} ${VKFORMER})

include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)  # expect()

expect(0 "Usage: vkformer.*--device SPEC.*devices" --help)
expect(0 "Usage: vkformer devices.*--json" devices --help)
expect(0 "^vkformer [0-9]+\\.[0-9]+\\.[0-9]+" --version)
expect(0 "vkformer uses device [0-9]+ \\(\\*\\).*subgroup size.*quirks" devices)
expect(0 "integer dot product +(no|yes; 4x8-bit packed accelerated: signed (yes|no))" devices)
expect(0 "chosen by --device=0" devices --device 0)
expect(0 "chosen by --device=0" --device 0 devices)
expect(1 "vkformer: error: no Vulkan device matches 'no-such-device'" devices --device no-such-device)
expect(1 "vkformer: error: no Vulkan device matches 'no-such-device'" --device no-such-device demo)
expect(2 "vkformer: error: unknown command 'no-such-command'" no-such-command)
expect(2 "vkformer: error: no command given" )
expect(2 "vkformer: error: .*--no-such-option" devices --no-such-option)
expect(0 "device 0:" demo --device 0)

# --json: valid JSON, numbers as numbers, the chosen device marked.
expect(0 "\"devices\"" devices --json)
string(JSON n_devices LENGTH "${last_output}" devices)
string(JSON chosen GET "${last_output}" selection index)
string(JSON chosen_flag GET "${last_output}" devices ${chosen} chosen)
string(JSON type_shared TYPE "${last_output}" devices 0 shared_memory_bytes)
string(JSON type_wg TYPE "${last_output}" devices 0 max_workgroup_count)
string(JSON type_quirks TYPE "${last_output}" devices 0 quirks)
string(JSON type_fp16 TYPE "${last_output}" devices 0 fp16_arithmetic)
foreach(key index name vendor type uuid driver_name driver_info driver_version api_version
            subgroup_size min_subgroup_size max_subgroup_size subgroup_arithmetic storage_16bit
            max_storage_buffer_range max_memory_allocation_size device_local_memory_bytes
            max_workgroup_size max_workgroup_invocations timestamps timestamp_period_ns
            cooperative_matrix_nv cooperative_matrix_khr)
  string(JSON unused ERROR_VARIABLE err GET "${last_output}" devices 0 ${key})
  if(err)
    message(SEND_ERROR "devices --json: devices[0] has no key '${key}'")
  endif()
endforeach()
if(n_devices LESS 1 OR NOT chosen_flag OR NOT type_shared STREQUAL "NUMBER" OR
   NOT type_wg STREQUAL "ARRAY" OR NOT type_quirks STREQUAL "ARRAY" OR
   NOT type_fp16 STREQUAL "BOOLEAN")
  message(SEND_ERROR "devices --json: unexpected shape (devices ${n_devices}, chosen ${chosen} "
                     "${chosen_flag}, types ${type_shared} ${type_wg} ${type_quirks} ${type_fp16})")
endif()
