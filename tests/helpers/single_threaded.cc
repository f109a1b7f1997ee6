// Linked into the unit test binaries that tests/CMakeLists.txt declares
// SINGLE_THREADED, in every tree but ThreadSanitizer's, which does not build
// them: a race needs two threads, so those binaries have nothing to show it.
// The declaration stays true because this definition of pthread_create
// comes before the C library's for every caller in the process (the
// binary's own code, libstdc++'s std::thread, Boost): a test that starts a
// thread ends here, and the message says what to change.
#include <pthread.h>

#include <cstdio>
#include <cstdlib>

extern "C" int pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*) {
  std::fputs(
      "this unit test binary is declared SINGLE_THREADED in tests/CMakeLists.txt, so the ThreadSanitizer "
      "tree does not build it, but it started a thread: remove SINGLE_THREADED from its mle_test()\n",
      stderr);
  std::abort();
}
