# Unity (jumbo) builds: with TPUGRAPHS_UNITY_BUILD=ON every target of ours compiles its .cc files
# in batches of TPUGRAPHS_UNITY_BATCH_SIZE, one translation unit per batch. Most of a file's
# compile time here is not its own code but what it instantiates from the headers it shares with
# its neighbours (Eigen, CLI11, spdlog/fmt, protobuf, GoogleTest); a batch instantiates each once.
# Four CLI sources under ASan + UBSan: 88 s apart, 32 s as one batch (docs/fuzzing.md, "Build
# time"). On by default; a developer rebuilding after an edit recompiles the edited file's batch,
# so -DTPUGRAPHS_UNITY_BUILD=OFF (UNITY=0 for tools/build.sh) compiles file by file, and
# tools/dev/check-standalone.sh checks that every source still compiles alone.
#
# CMake's own UNITY_BUILD (3.25) includes the sources by absolute path, which makes every batch a
# new file to ccache in a checkout at another path. The batches written here include their
# sources by a path relative to the batch file, so two clones at different paths share the
# cache (tools/build.sh sets CCACHE_BASEDIR to the checkout).
#
# A source that must be compiled on its own (its own compile definitions, or code that cannot
# share a translation unit) keeps its own: set the source property TPUGRAPHS_NO_UNITY.
option(TPUGRAPHS_UNITY_BUILD "Compile each target's sources in batches (unity build)" ON)
set(TPUGRAPHS_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per translation unit of a unity build")

# Replaces TARGET's .cc sources by batch files under ${CMAKE_CURRENT_BINARY_DIR}/unity/TARGET/.
# Called at the end of the directory that defines TARGET (tpugraphs_unity_later), when every
# target_sources() call has been made.
function(tpugraphs_unity target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(kept "")
  set(batchable "")
  foreach(src IN LISTS sources)
    if(IS_ABSOLUTE "${src}")
      set(path "${src}")
    else()
      set(path "${source_dir}/${src}")
    endif()
    get_source_file_property(defs "${path}" COMPILE_DEFINITIONS)
    get_source_file_property(opts "${path}" COMPILE_OPTIONS)
    get_source_file_property(own "${path}" TPUGRAPHS_NO_UNITY)
    get_source_file_property(generated "${path}" GENERATED)
    if(NOT path MATCHES "\\.cc$" OR defs OR opts OR own OR generated)
      list(APPEND kept "${src}")
    else()
      list(APPEND batchable "${path}")
    endif()
  endforeach()
  list(LENGTH batchable count)
  if(count LESS 2)
    return()
  endif()
  list(SORT batchable)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/unity/${target}")
  set(batches "")
  set(content "")
  set(in_batch 0)
  set(index 0)
  foreach(path IN LISTS batchable)
    file(RELATIVE_PATH rel "${dir}" "${path}")
    string(APPEND content "#include \"${rel}\"\n")
    math(EXPR in_batch "${in_batch} + 1")
    if(in_batch EQUAL TPUGRAPHS_UNITY_BATCH_SIZE)
      # file(CONFIGURE) rewrites a batch only when its text changes, so a reconfigure does not
      # recompile it.
      file(CONFIGURE OUTPUT "${dir}/batch_${index}.cc" CONTENT "${content}" @ONLY)
      list(APPEND batches "${dir}/batch_${index}.cc")
      math(EXPR index "${index} + 1")
      set(content "")
      set(in_batch 0)
    endif()
  endforeach()
  if(in_batch GREATER 0)
    file(CONFIGURE OUTPUT "${dir}/batch_${index}.cc" CONTENT "${content}" @ONLY)
    list(APPEND batches "${dir}/batch_${index}.cc")
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batches})
endfunction()

# Schedules tpugraphs_unity(TARGET) for the end of the current directory's CMakeLists.txt.
function(tpugraphs_unity_later target)
  if(TPUGRAPHS_UNITY_BUILD)
    # A deferred call's arguments are expanded when it runs, so the name is spliced in now.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL tpugraphs_unity [[${target}]])")
  endif()
endfunction()
