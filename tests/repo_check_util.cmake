# What the repository checks run with cmake -P (check_conflict_markers.cmake and
# cli/check_sync_primitives.cmake) share: a floor on the files they read, since a wrong
# SOURCE_DIR or glob would otherwise pass by reading nothing, and their verdict.

# repo_check_files(<script> <list variable> <at least> <kind>): fails naming the script when
# fewer files were found; sets `count` in the caller.
function(repo_check_files script list_var at_least kind)
  list(LENGTH ${list_var} n)
  if(n LESS at_least)
    message(FATAL_ERROR "${script}: only ${n} ${kind} files under ${SOURCE_DIR}")
  endif()
  set(count ${n} PARENT_SCOPE)
endfunction()

# repo_check_verdict(<found> <failure> <success>): FATAL_ERROR "<failure>:<found>" when anything
# was found, else the success line.
function(repo_check_verdict found failure success)
  if(found)
    message(FATAL_ERROR "${failure}:${found}")
  endif()
  message(STATUS "${success}")
endfunction()
