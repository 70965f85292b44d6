# ctest bench_diloco_stream_async: the async<S> streaming arms of tandem-bench-diloco
# (diloco_stream_async.cpp), from the JSON of one smoke-sized run. Call with -DPROGRAM=...
# -DOUT_DIR=...
#  1. With S = 1 (every worker as fast) the fragment rounds close at the lockstep arm's syncs,
#     worked out by hand, every upload is on time and none is skipped, merges change nothing
#     outside their fragments, and the run ends within 0.1% of the lockstep arm (they differ only
#     in the first syncs' weights and the lockstep arm's last sync).
#  2. carry keeps all a worker has not sent: one worker with outer lr 1 and no momentum, whose
#     weights become its own at every sync, ends where it trains alone (DiLoCo with one
#     worker, to 1e-5: the rounding of theta - (theta - own)); without carry it loses its steps
#     since each upload and ends about 1% higher.
#  3. S = 2: the slowest worker trains half the steps of the fastest, the tokens are the other
#     arms', and with a round waiting for every worker the fast ones skip turns; sized gives
#     the faster workers longer units.
#  4. Options async<S> does not take are refused with a message.
set(json_path "${OUT_DIR}/diloco_stream_async.json")
file(REMOVE "${json_path}")
set(arms "h10-fp16-stream2-mix0,h10-fp16-stream2-async1,h10-fp32-m1-olr1-mom0")
string(APPEND arms ",h10-fp32-stream2-async1-carry-m1-olr1-mom0,h10-fp32-stream2-async1-m1-olr1-mom0")
string(APPEND arms ",h10-fp16-stream2-async2,h10-fp16-stream2-async2-sized-carry")
execute_process(COMMAND "${PROGRAM}" --smoke --arms "${arms}" --jobs 1 --json "${json_path}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 77)
  message("SKIP: the program skipped (no corpus)")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tandem-bench-diloco --smoke --arms ${arms} exited with ${rc}")
endif()
file(READ "${json_path}" json)
string(JSON runs LENGTH "${json}" runs)
include(${CMAKE_CURRENT_LIST_DIR}/diloco_json.cmake)

# A loss (CMake's JSON reader may print it with 17 digits) in millionths, truncated: CMake's
# arithmetic is on integers.
function(millionths value out)
  if(NOT value MATCHES "^([0-9]+)\\.([0-9]*)")
    message(FATAL_ERROR "'${value}' is not a loss")
  endif()
  set(whole ${CMAKE_MATCH_1})
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 decimals)
  math(EXPR result "${whole} * 1000000 + 1${decimals} - 1000000")
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# 1. Lockstep speeds.
run_of(h10-fp16-stream2-mix0 l)
run_of(h10-fp16-stream2-async1 a)
string(JSON syncs GET "${json}" runs ${a} stream firstSyncs)
string(REGEX REPLACE "[ \n]" "" syncs "${syncs}")
set(expected "[[10,0],[15,1],[20,0],[25,1],[30,0],[35,1],[40,0],[40,1]]")
if(NOT syncs STREQUAL expected)
  message(FATAL_ERROR "async1: rounds closed at (step, fragment) ${syncs}, expected ${expected}")
endif()
foreach(field staleResults droppedUploads stream.skipped stream.mergeChangedOutside)
  string(REPLACE "." ";" path "${field}")
  string(JSON value GET "${json}" runs ${a} ${path})
  if(NOT value EQUAL 0)
    message(FATAL_ERROR "async1: ${field} is ${value}, expected 0")
  endif()
endforeach()
string(JSON inside GET "${json}" runs ${a} stream mergeChangedInside)
string(JSON steps_min GET "${json}" runs ${a} stream stepsMin)
string(JSON steps_max GET "${json}" runs ${a} stream stepsMax)
if(NOT inside GREATER 0 OR NOT steps_min EQUAL 40 OR NOT steps_max EQUAL 40)
  message(FATAL_ERROR "async1: ${inside} values changed by merges, steps ${steps_min}.."
    "${steps_max}; expected some, and 40 for every worker")
endif()
string(JSON x GET "${json}" runs ${l} finalLoss)
string(JSON y GET "${json}" runs ${a} finalLoss)
millionths(${x} x_digits)
millionths(${y} y_digits)
math(EXPR diff "${x_digits} - ${y_digits}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
math(EXPR limit "${x_digits} / 1000")
if(diff GREATER limit)
  message(FATAL_ERROR "async1 ends at ${y}, the lockstep arm at ${x}: more than 0.1% apart")
endif()

# 2. carry: one worker's own training. Its weights become its own at each sync up to the
#    rounding of theta - (theta - own), so the losses agree to 1e-5 (both printed to 1e-6);
#    without carry the worker loses its steps since each upload (about 1% here).
run_of(h10-fp32-m1-olr1-mom0 d)
run_of(h10-fp32-stream2-async1-carry-m1-olr1-mom0 c)
run_of(h10-fp32-stream2-async1-m1-olr1-mom0 r)
string(JSON alone GET "${json}" runs ${d} finalLoss)
string(JSON carried GET "${json}" runs ${c} finalLoss)
string(JSON replaced GET "${json}" runs ${r} finalLoss)
millionths(${alone} a_m)
millionths(${carried} c_m)
millionths(${replaced} r_m)
math(EXPR diff "${a_m} - ${c_m}")
if(diff GREATER 35 OR diff LESS -35)
  message(FATAL_ERROR "async1-carry with one worker ends at ${carried}, its own training at "
    "${alone}: a merge lost or repeated some of its progress")
endif()
math(EXPR diff "${r_m} - ${a_m}")
if(diff LESS 3500)
  message(FATAL_ERROR "async1 without carry ends at ${replaced}, one worker alone at ${alone}: "
    "expected the steps since each upload to be lost (about 1%)")
endif()

# 3. Two speeds.
foreach(arm h10-fp16-stream2-async2 h10-fp16-stream2-async2-sized-carry)
  run_of(${arm} s)
  string(JSON steps_min GET "${json}" runs ${s} stream stepsMin)
  string(JSON steps_max GET "${json}" runs ${s} stream stepsMax)
  string(JSON skipped GET "${json}" runs ${s} stream skipped)
  string(JSON outside GET "${json}" runs ${s} stream mergeChangedOutside)
  string(JSON first GET "${json}" runs ${s} curve 0 valLoss)
  string(JSON final GET "${json}" runs ${s} finalLoss)
  # 4 workers at step times 1, 4/3, 5/3 and 2 share 160 steps: 56, 42, 34 and 28.
  if(NOT steps_min EQUAL 28 OR NOT steps_max EQUAL 56 OR NOT outside EQUAL 0
     OR NOT final LESS first)
    message(FATAL_ERROR "${arm}: steps ${steps_min}..${steps_max}, ${outside} values changed "
      "outside merged fragments, loss ${first} -> ${final}; expected 28..56, 0, a decrease")
  endif()
  if(arm STREQUAL "h10-fp16-stream2-async2" AND NOT skipped GREATER 0)
    message(FATAL_ERROR "${arm}: no turn skipped, though every round waits for the slowest")
  endif()
endforeach()

# 4. Refused, with a message.
foreach(arm h10-fp16-stream2-async2-drop30 h10-fp16-stream2-async2-tau3 h10-fp16-carry
            h10-fp16-stream3-async2)
  execute_process(COMMAND "${PROGRAM}" --smoke --arms ${arm}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "async<S>")
    message(FATAL_ERROR "${arm}: exit ${rc}, '${err}'; expected 2 and a message about async<S>")
  endif()
endforeach()
message("async streaming arms: S = 1 closes the lockstep syncs, carry keeps a lone worker's "
  "training to 1e-5, S = 2 splits the steps 56..28")
