# Sanitizer and fuzzing builds of mlengine (docs/architecture.md, "Testing").
#
#   -DMLE_SANITIZE=address  AddressSanitizer + UndefinedBehaviorSanitizer; any
#                           UB report aborts (-fno-sanitize-recover=undefined)
#   -DMLE_SANITIZE=thread   ThreadSanitizer
#   -DMLE_FUZZ=ON           libFuzzer targets of tests/fuzz (clang only); every
#                           module (and each fuzz target) is built with
#                           coverage for them (MLE_FUZZ_COVERAGE_FLAGS), so
#                           the unit tests of the same tree still link
#                           without libFuzzer. The unit tests' own files are
#                           not: no fuzzer runs them, and the coverage
#                           made them compile a third slower.
#                           Usually with MLE_SANITIZE=address.
#
# The flags apply to every target of the tree (our libraries, tests and
# programs); prebuilt Debian libraries are not instrumented.

set(MLE_SANITIZE "" CACHE STRING "Sanitizer build: empty, address (ASan+UBSan) or thread (TSan)")
set_property(CACHE MLE_SANITIZE PROPERTY STRINGS "" address thread)
option(MLE_FUZZ "Build the libFuzzer targets of tests/fuzz (needs clang)" OFF)

if(MLE_SANITIZE STREQUAL "address")
  set(MLE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(MLE_SANITIZE STREQUAL "thread")
  set(MLE_SANITIZE_FLAGS -fsanitize=thread)
elseif(NOT MLE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "MLE_SANITIZE must be empty, address or thread (got '${MLE_SANITIZE}')")
endif()

if(MLE_SANITIZE_FLAGS)
  # -O0 and line tables only (-g1): these trees are built on every test run,
  # and -O0 compiles in half the time of -O1 while the unit tests still run
  # in seconds; stacks keep file and line. They come after the build type's
  # -O2 -g on the command line, so they win.
  add_compile_options(${MLE_SANITIZE_FLAGS} -O0 -g1 -fno-omit-frame-pointer)
  add_link_options(${MLE_SANITIZE_FLAGS})
endif()

if(MLE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MLE_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  set(MLE_FUZZ_COVERAGE_FLAGS -fsanitize=fuzzer-no-link)
endif()
