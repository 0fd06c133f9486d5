/* fp16 and bf16 conversions on all 65536 bit patterns, against references
 * computed independently: ldexp() for decoding, and for encoding the
 * compiler's _Float16 (IEEE round-to-nearest-even) and exhaustive nearest
 * search. */
#include "test_support.h"

#include "core/half.h"

#include <math.h>
#include <string.h>

/* Decodes binary16 from its definition. */
static double f16_reference(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = man ? NAN : INFINITY;
  else if (exp == 0) v = ldexp(man, -24);
  else v = ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

static void test_f16_decode_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float got = brisk_f16_to_f32((uint16_t)h);
    double want = f16_reference((uint16_t)h);
    if (isnan(want)) {
      assert_true(isnan(got));
      assert_int_equal(signbit(got) != 0, (h >> 15) != 0);
    } else {
      assert_true((double)got == want);
      assert_int_equal(signbit(got) != 0, signbit(want) != 0);
    }
  }
}

/* Round trip: every non-NaN half survives f16 -> f32 -> f16 bit-exactly;
 * NaNs stay NaN. */
static void test_f16_roundtrip_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t back = brisk_f32_to_f16(brisk_f16_to_f32((uint16_t)h));
    bool is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
    if (is_nan) assert_true(((back >> 10) & 0x1f) == 0x1f && (back & 0x3ff));
    else assert_int_equal(back, h);
  }
}

/* Encoding checked at every midpoint between neighbouring halves (ties go to
 * even), just above and below it, and on random floats against _Float16. */
static void test_f16_encode_rounding(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = f16_reference((uint16_t)h);
    double hi = h + 1 < 0x7c00 ? f16_reference((uint16_t)(h + 1)) : 65536.0;
    double mid = (lo + hi) / 2;
    float fm = (float)mid; /* exact: midpoints need at most 12 significant bits */
    assert_true((double)fm == mid);
    uint16_t want_tie = (h & 1) ? (uint16_t)(h + 1 < 0x7c00 ? h + 1 : 0x7c00) : (uint16_t)h;
    assert_int_equal(brisk_f32_to_f16(fm), want_tie);
    assert_int_equal(brisk_f32_to_f16(-fm), want_tie | 0x8000);
    float above = nextafterf(fm, INFINITY), below = nextafterf(fm, 0);
    assert_int_equal(brisk_f32_to_f16(above), h + 1 < 0x7c00 ? h + 1 : 0x7c00);
    assert_int_equal(brisk_f32_to_f16(below), h);
  }
  assert_int_equal(brisk_f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(brisk_f32_to_f16(-INFINITY), 0xfc00);
  assert_int_equal(brisk_f32_to_f16(1e10f), 0x7c00);
  uint16_t qnan = brisk_f32_to_f16(NAN);
  assert_true((qnan & 0x7c00) == 0x7c00 && (qnan & 0x3ff));
#if defined(__FLT16_MAX__)
  test_rng r = test_rng_seeded("f16_encode_random");
  for (int i = 0; i < 1000000; i++) {
    uint32_t bits = (uint32_t)test_rng_u64(&r);
    float f;
    memcpy(&f, &bits, 4);
    if (isnan(f)) continue;
    __extension__ _Float16 ref = (__extension__(_Float16)f);
    uint16_t want;
    memcpy(&want, &ref, 2);
    assert_int_equal(brisk_f32_to_f16(f), want);
  }
#endif
}

static void test_bf16_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = brisk_bf16_to_f32((uint16_t)h);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    assert_int_equal(bits, h << 16); /* bf16 is the top half of a float32 */
    if (isnan(f)) assert_true(isnan(brisk_bf16_to_f32(brisk_f32_to_bf16(f))));
    else assert_int_equal(brisk_f32_to_bf16(f), h);
  }
  /* Rounding: nearest, ties to even, against a double computation. */
  test_rng r = test_rng_seeded("bf16_rounding");
  for (int i = 0; i < 1000000; i++) {
    uint32_t bits = (uint32_t)test_rng_u64(&r);
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u; /* exact ties */
    float f;
    memcpy(&f, &bits, 4);
    if (isnan(f) || isinf(f)) continue;
    uint16_t lo = (uint16_t)(bits >> 16);
    double flo = brisk_bf16_to_f32(lo), fhi = brisk_bf16_to_f32((uint16_t)(lo + 1));
    /* IEEE rounding treats the step past the largest finite value as 2^128. */
    if (isinf(fhi)) fhi = copysign(ldexp(1.0, 128), fhi);
    double dlo = fabs((double)f - flo), dhi = fabs(fhi - (double)f);
    uint16_t want = dlo < dhi ? lo : dhi < dlo ? (uint16_t)(lo + 1) : ((lo & 1) ? lo + 1 : lo);
    assert_int_equal(brisk_f32_to_bf16(f), want);
  }
}

static void test_arrays(void **state) {
  (void)state;
  uint16_t h[257], back[257];
  float f[257];
  test_rng r = test_rng_seeded("half_arrays");
  for (int i = 0; i < 257; i++) h[i] = (uint16_t)(test_rng_u64(&r) & 0x7bff);
  brisk_f16_to_f32_array(h, f, 257);
  brisk_f32_to_f16_array(f, back, 257);
  assert_memory_equal(h, back, sizeof h);
  brisk_bf16_to_f32_array(h, f, 257);
  brisk_f32_to_bf16_array(f, back, 257);
  assert_memory_equal(h, back, sizeof h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_decode_all),   cmocka_unit_test(test_f16_roundtrip_all),
      cmocka_unit_test(test_f16_encode_rounding), cmocka_unit_test(test_bf16_all),
      cmocka_unit_test(test_arrays),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
