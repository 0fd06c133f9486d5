/* Overflow-checked size arithmetic for everything computed from untrusted
 * input (file headers, API arguments). Each returns true on overflow. */
#ifndef BRISK_CORE_CHECKED_H
#define BRISK_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool brisk_mul_overflow_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline bool brisk_add_overflow_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_add_overflow(a, b, out);
}
static inline bool brisk_mul_overflow_size(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline bool brisk_add_overflow_size(size_t a, size_t b, size_t *out) {
  return __builtin_add_overflow(a, b, out);
}
/* Rounds x up to a multiple of the power of two `align`; true on overflow. */
static inline bool brisk_align_up_u64(uint64_t x, uint64_t align, uint64_t *out) {
  if (__builtin_add_overflow(x, align - 1, out)) return true;
  *out &= ~(align - 1);
  return false;
}

#endif
