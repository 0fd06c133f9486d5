/* Multi-head latent attention (mla_kv_write, mla_attention) and
 * group-limited MoE routing on every CPU kernel path, with and without a
 * thread pool, against the float64 references of mla_ref.h. */
#include "ops_test.h"

#include "mla_ref.h"

static void test_mla_attention(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("mla_attention");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (int b = 0; b < P.n; b++)
      for (int i = 0; i < 12; i++) {
        uint32_t dtype = i % 2 ? BRISK_DTYPE_F16 : BRISK_DTYPE_F32;
        double e = mla_check_case(P.be[b], &r, dtype);
        /* float32 sums of a few hundred products of order-one values. */
        if (e > 2e-5) {
          fprintf(stderr, "%s case %d (%s): error %.3g\n", P.be[b]->name, i,
                  brisk_dtype_name(dtype), e);
          fail();
        }
      }
    ops_paths_close(&P);
  }
}

static void test_mla_refusals(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  mla_check_refusals(P.be[0]);
  ops_paths_close(&P);
}

static void test_moe_route_group(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("moe_route_group");
  ops_paths P = ops_paths_open(2);
  for (int b = 0; b < P.n; b++) mla_check_route_group(P.be[b], &r);
  ops_paths_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mla_attention),
      cmocka_unit_test(test_mla_refusals),
      cmocka_unit_test(test_moe_route_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
