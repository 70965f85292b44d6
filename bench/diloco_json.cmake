# What the check_diloco_*.cmake scripts share: run_of(ARM OUT) sets OUT to the index of ARM's
# run in ${json} (${runs} runs), or fails.
function(run_of arm out)
  math(EXPR last "${runs} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" runs ${i} arm)
    if(name STREQUAL arm)
      set(${out} ${i} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no run of ${arm} in the JSON")
endfunction()
