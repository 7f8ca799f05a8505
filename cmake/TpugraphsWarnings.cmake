# Warning and sanitizer flags, applied per target (never through global CMAKE_CXX_FLAGS).
# Every target of ours passes through here, so this also schedules its unity batches
# (cmake/TpugraphsUnity.cmake; nothing when TPUGRAPHS_UNITY_BUILD is off).
function(tpugraphs_set_warnings target)
  tpugraphs_unity_later(${target})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(TPUGRAPHS_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(TPUGRAPHS_NATIVE)
    # On AVX-512 machines GCC 12 warns (falsely) about uninitialised values inside its own
    # avx512fintrin.h when Eigen uses those intrinsics.
    target_compile_options(${target} PRIVATE -march=native
                                             $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  elseif(TPUGRAPHS_PORTABLE_ARCH AND NOT TPUGRAPHS_PORTABLE_ARCH STREQUAL "generic")
    target_compile_options(${target} PRIVATE -march=${TPUGRAPHS_PORTABLE_ARCH})
  endif()
  if((TPUGRAPHS_SANITIZE_ADDRESS OR TPUGRAPHS_SANITIZE_UNDEFINED OR TPUGRAPHS_SANITIZE_THREAD)
     AND NOT TPUGRAPHS_BUILD_FUZZERS)
    # The sanitized test build compiles at -O1 (after the build type's -O3, so it wins), the
    # level the sanitizer documentation recommends: every check is still inserted, and the
    # whole sanitized build takes 1.6 times less CPU than at -O3 (docs/fuzzing.md, "Cost").
    # Fuzzer builds keep -O3 for executions per second. At -O1 GCC 12 also reports the
    # avx512fintrin.h false positive above as -Wuninitialized; the normal build keeps that
    # warning for our code.
    target_compile_options(${target} PRIVATE -O1)
    if(TPUGRAPHS_NATIVE)
      target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-uninitialized>)
    endif()
  endif()
  if(TPUGRAPHS_SANITIZE_ADDRESS)
    target_compile_options(${target} PRIVATE -fsanitize=address -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address)
  endif()
  if(TPUGRAPHS_SANITIZE_UNDEFINED)
    # Halt on the first report: a sanitizer finding fails the test that triggered it.
    target_compile_options(${target} PRIVATE -fsanitize=undefined -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=undefined -fno-sanitize-recover=all)
  endif()
  if(TPUGRAPHS_SANITIZE_THREAD)
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  endif()
  if(TPUGRAPHS_BUILD_FUZZERS)
    # Coverage instrumentation for libFuzzer (the harnesses link the fuzzer runtime itself).
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
