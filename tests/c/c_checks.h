/* The checks the C conformance tests share: one line per check ("PASS ..." or "FAIL line N: ..."),
 * counted, and a closing "N passed, M failed" whose exit status meson reads. Each test is one
 * translation unit, so the counters live here as statics. */
#ifndef HIPXX_TESTS_C_CHECKS_H
#define HIPXX_TESTS_C_CHECKS_H

#include <hip/hip_runtime_api.h>

#include <stdio.h>

static int passed = 0;
static int failed = 0;

static void check(int ok, const char* what, int line) {
  if (ok) {
    ++passed;
    printf("PASS %s\n", what);
  } else {
    ++failed;
    printf("FAIL line %d: %s\n", line, what);
  }
}

/* One check of a call's exact result; prints the name of what came back when it differs. */
static void check_result(hipError_t got, hipError_t expected, const char* what, int line) {
  if (got != expected) {
    ++failed;
    printf("FAIL line %d: %s: got %s (%d), expected %s (%d)\n", line, what, hipGetErrorName(got), (int)got,
           hipGetErrorName(expected), (int)expected);
  } else {
    ++passed;
    printf("PASS %s\n", what);
  }
}

/* The summary line, and main's exit status. */
static int checks_summary(void) {
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

#define CHECK(expr) check((expr) ? 1 : 0, #expr, __LINE__)
#define CHECK_RESULT(call, expected) check_result((call), (expected), #call, __LINE__)

#endif
