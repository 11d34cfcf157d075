# The built-in kernel roles' code hashes (suite/role_sources.h), as functions that both
# suite/CMakeLists.txt and its self-test (tests/role_hashes_selftest.cmake) call.
#
# A role lists its translation units under DIR (kernels/decode/); the headers they include from
# there ("kernels/decode/...", transitively) join its set, so a header's change changes every
# role that compiles it. Every .cu and .cpp of DIR but the host sources named must be some
# role's: a kernel file in none stops with an error naming it.

# `files` (names under `dir`) and what they include from there, transitively, in the order first
# met, into `out`.
function(kg_include_closure out dir files)
  set(done "")
  set(todo ${files})
  while(todo)
    list(POP_FRONT todo f)
    if(f IN_LIST done)
      continue()
    endif()
    if(NOT EXISTS ${dir}/${f})
      message(FATAL_ERROR "a kernel role lists kernels/decode/${f}, which does not exist")
    endif()
    list(APPEND done ${f})
    file(STRINGS ${dir}/${f} includes REGEX "^#include \"kernels/decode/[^\"]+\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"kernels/decode/([^\"]+)\".*" "\\1" inc "${line}")
      list(APPEND todo ${inc})
    endforeach()
  endwhile()
  set(${out} ${done} PARENT_SCOPE)
endfunction()

# `sets`: entries "IMPL=unit,unit,...". Sets `out` to the C++ initializer list
# {"IMPL", "SHA-256 of its files' SHA-256s, concatenated"}, ... and `out_files` to every file read.
function(kg_role_hashes out out_files dir sets host_sources)
  set(hashes "")
  set(covered ${host_sources})
  set(read "")
  foreach(entry IN LISTS sets)
    string(REPLACE "=" ";" parts "${entry}")
    list(GET parts 0 impl)
    list(GET parts 1 files)
    string(REPLACE "," ";" files "${files}")
    kg_include_closure(files ${dir} "${files}")
    list(APPEND covered ${files})
    set(joined "")
    foreach(f IN LISTS files)
      file(SHA256 ${dir}/${f} h)
      string(APPEND joined "${h}")
      list(APPEND read ${dir}/${f})
    endforeach()
    string(SHA256 combined "${joined}")
    string(APPEND hashes "{\"${impl}\", \"${combined}\"}, ")
  endforeach()
  file(GLOB units RELATIVE ${dir} ${dir}/*.cu ${dir}/*.cpp)
  foreach(f IN LISTS units)
    if(NOT f IN_LIST covered)
      message(FATAL_ERROR "kernels/decode/${f} is in no kernel role's code hash: add it to its "
                          "role in suite/CMakeLists.txt (kg_role_sets), or to the host sources")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES read)
  set(${out} "${hashes}" PARENT_SCOPE)
  set(${out_files} ${read} PARENT_SCOPE)
endfunction()
