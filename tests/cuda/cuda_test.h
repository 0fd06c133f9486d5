/* Shared by the kernel tests: the CPU backend as the reference, the random
 * input helpers of the CPU operation tests, and a failed-launch report. In
 * the emulation device memory is host memory, so kernels get plain host
 * buffers. */
#ifndef BRISK_TESTS_CUDA_TEST_H
#define BRISK_TESTS_CUDA_TEST_H

#include "ops_test.h"

#include "kernels/kerror.h"

static inline brisk_backend *cpu_reference(void) {
  brisk_backend *be = NULL;
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be), BRISK_OK);
  return be;
}

/* Asserts that a launcher returned 0, printing the reason if not. */
#define ASSERT_LAUNCH(call)                                                                        \
  do {                                                                                             \
    int st_ = (call);                                                                              \
    if (st_ != 0) {                                                                                \
      fprintf(stderr, "%s: status %d: %s\n", #call, st_, brisk_kerror_string(st_));                \
      fail();                                                                                      \
    }                                                                                              \
  } while (0)

/* Bitwise equality of n elements of size sz. */
#define ASSERT_BITS_EQUAL(got, want, n, ...)                                                       \
  do {                                                                                             \
    for (size_t i_ = 0; i_ < (size_t)(n); i_++)                                                    \
      if (memcmp(&(got)[i_], &(want)[i_], sizeof *(got)) != 0) {                                   \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, ": element %zu differs\n", i_);                                            \
        fail();                                                                                    \
      }                                                                                            \
  } while (0)

#endif
