cmake_minimum_required(VERSION 3.25) # (policies: IN_LIST)
# cmake/role_hashes.cmake's own test, in a scratch tree WORK (removed at the end):
#   cmake -DSRC=<repository> -DWORK=<scratch folder> -P tests/role_hashes_selftest.cmake
# A role's hash is the hash of its unit's and its headers' hashes, included transitively, in the
# order met; a header's change changes it; a kernel file in no role stops with its name (checked
# in a child cmake, MODE=plant, since FATAL_ERROR ends a script).
include(${SRC}/cmake/role_hashes.cmake)
if(MODE STREQUAL "plant")
  kg_role_hashes(h files ${WORK} "r.a=a.cu" "host.cpp")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/a.cu "#include \"kernels/decode/a.cuh\"\n#include <cstdio>\nint a;\n")
file(WRITE ${WORK}/a.cuh "#pragma once\n#include \"kernels/decode/b.cuh\"\n// a\n")
file(WRITE ${WORK}/b.cuh "#pragma once\n#include \"kernels/decode/a.cuh\"\n// b\n") # a cycle
file(WRITE ${WORK}/host.cpp "int host;\n")
file(WRITE ${WORK}/other.cuh "// included by nothing\n")

kg_role_hashes(h1 files1 ${WORK} "r.a=a.cu" "host.cpp")
file(SHA256 ${WORK}/a.cu s1)
file(SHA256 ${WORK}/a.cuh s2)
file(SHA256 ${WORK}/b.cuh s3)
string(SHA256 want "${s1}${s2}${s3}")
if(NOT h1 STREQUAL "{\"r.a\", \"${want}\"}, ")
  message(FATAL_ERROR "FAIL: the hash of a.cu, a.cuh, b.cuh: got ${h1}, want ${want}")
endif()
list(LENGTH files1 n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "FAIL: files read: ${files1} (want a.cu, a.cuh, b.cuh)")
endif()

file(WRITE ${WORK}/b.cuh "#pragma once\n// b, changed\n")
kg_role_hashes(h2 files2 ${WORK} "r.a=a.cu" "host.cpp")
if(h2 STREQUAL h1)
  message(FATAL_ERROR "FAIL: a change in a header two includes down left the hash as it was")
endif()

file(WRITE ${WORK}/planted.cu "__global__ void k() {}\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${SRC} -DWORK=${WORK} -DMODE=plant -P
                        ${CMAKE_CURRENT_LIST_FILE}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(REMOVE_RECURSE ${WORK})
if(rc EQUAL 0 OR NOT err MATCHES "kernels/decode/planted.cu is in no kernel role")
  message(FATAL_ERROR "FAIL: a kernel file in no role was not refused (exit ${rc}): ${err}")
endif()
message(STATUS "role hashes: transitive headers hashed in order, a header change seen, a file in "
               "no role refused")
