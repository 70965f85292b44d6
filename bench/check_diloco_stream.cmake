# ctest bench_diloco_stream: the streaming arms of tandem-bench-diloco (diloco_stream.cpp) against
# two oracles, from the JSON of one smoke-sized run. Call with -DPROGRAM=... -DOUT_DIR=...
#  1. stream1-tau0-mix0 (one fragment, merged at once, replaced) is DiLoCo: the same final loss to
#     the last bit (finalLossHex), the same curve and bytes as h10 with the same codec.
#  2. With F = 2, tau = 0, mix 0 on H = 10 and 40 steps, by hand: fragment 0 syncs after steps 10,
#     20, 30, 40, fragment 1 (offset 5) after 15, 25, 35 and, as every fragment, after the last
#     step (40); each sync is merged at once, and a merge changes no worker's value outside its
#     fragment (the workers' parameters read back before and after), but changes some inside.
#  3. Faults per fragment upload follow DiLoCo's rules: with one fragment, drop30, drop30-keep,
#     drop30-tokw and stale1 end where the same DiLoCo arms do, to the last bit. With F = 2,
#     keep skips exactly one worker merge per lost upload, and stale1 delays one upload per sync.
#  4. A streaming arm with an option it does not take is refused with a message.
set(json_path "${OUT_DIR}/diloco_stream.json")
file(REMOVE "${json_path}")
set(arms "h10-fp16,h10-fp16-stream1-tau0-mix0,h10-int8,h10-int8-stream1-tau0-mix0")
string(APPEND arms ",h10-fp16-stream2-tau0-mix0,h10-int8-stream2")
set(fault_arms drop30 drop30-keep drop30-tokw stale1)
foreach(fault ${fault_arms})
  string(APPEND arms ",h10-fp16-${fault},h10-fp16-stream1-tau0-mix0-${fault}")
endforeach()
string(APPEND arms ",h10-fp16-stream2-tau0-mix0-drop30-keep,h10-fp16-stream2-tau0-mix0-stale1")
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
if(NOT runs EQUAL 16)
  message(FATAL_ERROR "expected 16 runs, found ${runs}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/diloco_json.cmake)

# Fails unless the runs of arms `diloco` and `streaming` agree on each field (ARGN).
function(expect_same diloco streaming)
  run_of(${diloco} a)
  run_of(${streaming} b)
  foreach(field ${ARGN})
    string(JSON x GET "${json}" runs ${a} ${field})
    string(JSON y GET "${json}" runs ${b} ${field})
    if(NOT x STREQUAL y)
      message(FATAL_ERROR "${field} of ${streaming} is ${y}, ${diloco}'s is ${x}")
    endif()
  endforeach()
endfunction()

# 1. The oracle: plain DiLoCo.
foreach(codec fp16 int8)
  expect_same(h10-${codec} h10-${codec}-stream1-tau0-mix0 finalLossHex bytesPerWorker)
  run_of(h10-${codec} a)
  run_of(h10-${codec}-stream1-tau0-mix0 b)
  string(JSON points LENGTH "${json}" runs ${a} curve)
  string(JSON points_b LENGTH "${json}" runs ${b} curve)
  if(NOT points EQUAL points_b)
    message(FATAL_ERROR "${codec}: ${points_b} curve points, DiLoCo has ${points}")
  endif()
  math(EXPR last_point "${points} - 1")
  foreach(p RANGE ${last_point})
    string(JSON x GET "${json}" runs ${a} curve ${p} valLoss)
    string(JSON y GET "${json}" runs ${b} curve ${p} valLoss)
    if(NOT x STREQUAL y)
      message(FATAL_ERROR "${codec}: curve point ${p} of stream1-tau0-mix0 is ${y}, DiLoCo's ${x}")
    endif()
  endforeach()
endforeach()

# 2. Two fragments: the schedule and the merges, by hand.
run_of(h10-fp16-stream2-tau0-mix0 s)
string(JSON syncs GET "${json}" runs ${s} stream firstSyncs)
string(REGEX REPLACE "[ \n]" "" syncs "${syncs}")
set(expected "[[10,0],[15,1],[20,0],[25,1],[30,0],[35,1],[40,0],[40,1]]")
if(NOT syncs STREQUAL expected)
  message(FATAL_ERROR "stream2: syncs (step, fragment) ${syncs}, expected ${expected}")
endif()
string(JSON merges GET "${json}" runs ${s} stream merges)
string(JSON inside GET "${json}" runs ${s} stream mergeChangedInside)
string(JSON outside GET "${json}" runs ${s} stream mergeChangedOutside)
string(JSON parameters GET "${json}" runs ${s} parameters)
string(JSON workers GET "${json}" runs ${s} workers)
if(NOT merges EQUAL 8)
  message(FATAL_ERROR "stream2 tau0: ${merges} merges, expected one per sync (8)")
endif()
if(NOT outside EQUAL 0)
  message(FATAL_ERROR "stream2: merges changed ${outside} values outside the merged fragment")
endif()
# Each fragment merges 4 times into K workers: at most 4 K P values change in all.
math(EXPR most "4 * ${workers} * ${parameters}")
if(NOT inside GREATER 0 OR inside GREATER most)
  message(FATAL_ERROR "stream2: merges changed ${inside} values inside, expected 1..${most}")
endif()
# It is not DiLoCo: two fragments end elsewhere.
run_of(h10-fp16 a)
string(JSON x GET "${json}" runs ${a} finalLossHex)
string(JSON y GET "${json}" runs ${s} finalLossHex)
if(x STREQUAL y)
  message(FATAL_ERROR "stream2 ends exactly where DiLoCo does (${x}): are fragments simulated?")
endif()
# The defaults (tau = H / F = 5, mix 0.5) learn; with tau > 0 the last syncs are never merged.
run_of(h10-int8-stream2 d)
string(JSON tau GET "${json}" runs ${d} stream tau)
string(JSON mix GET "${json}" runs ${d} stream mix)
string(JSON merges GET "${json}" runs ${d} stream merges)
string(JSON first GET "${json}" runs ${d} curve 0 valLoss)
string(JSON final GET "${json}" runs ${d} finalLoss)
if(NOT tau EQUAL 5 OR NOT mix EQUAL 0.5 OR NOT merges EQUAL 6 OR NOT final LESS first)
  message(FATAL_ERROR "h10-int8-stream2: tau ${tau}, mix ${mix}, ${merges} merges, loss "
    "${first} -> ${final}; expected 5, 0.5, 6 and a decrease")
endif()

# 3. Faults: DiLoCo's to the bit with one fragment; counted as by hand with two.
foreach(fault ${fault_arms})
  expect_same(h10-fp16-${fault} h10-fp16-stream1-tau0-mix0-${fault}
    finalLossHex droppedUploads staleResults emptyRounds)
endforeach()
run_of(h10-fp16-stream2-tau0-mix0-drop30-keep k)
string(JSON dropped GET "${json}" runs ${k} droppedUploads)
string(JSON kept GET "${json}" runs ${k} stream keptOwn)
string(JSON outside GET "${json}" runs ${k} stream mergeChangedOutside)
if(dropped EQUAL 0 OR NOT kept EQUAL dropped OR NOT outside EQUAL 0)
  message(FATAL_ERROR "stream2 drop30-keep: ${dropped} uploads lost, ${kept} merges skipped, "
    "${outside} values changed outside; expected as many skipped as lost (> 0), and 0")
endif()
run_of(h10-fp16-stream2-tau0-mix0-stale1 l)
string(JSON late GET "${json}" runs ${l} staleResults)
string(JSON syncs GET "${json}" runs ${l} stream syncs)
if(NOT late EQUAL syncs)
  message(FATAL_ERROR "stream2 stale1: ${late} late uploads in ${syncs} syncs, expected one each")
endif()

# 4. Refused, with a message.
execute_process(COMMAND "${PROGRAM}" --smoke --arms h10-fp16-pipe-stream2
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "stream<F> overlaps by its own schedule")
  message(FATAL_ERROR "h10-fp16-pipe-stream2: exit ${rc}, '${err}'; expected 2 and a message")
endif()
message("streaming arms: stream1-tau0-mix0 is DiLoCo to the bit, with and without faults; "
  "F = 2 syncs, merges, keeps and late uploads as by hand")
