/* The latent attention kernels (kernels/mla.cu) through the SIMT emulation,
 * against the CPU backend (itself checked against float64 in
 * tests/backend/ops/test_mla.c) on fresh random caches: the kernel's writes
 * must give the CPU's pool bytes exactly, its attention the CPU's within
 * float32 summation-order error, and a query alone the same bits as in a
 * batch; in reverse thread order too (meson's _reverse run), so a missing
 * barrier shows. Also group-limited routing (kernels/select.cu): ids equal
 * the CPU's, weights within one float64-rounded ulp. */
#include "cuda_test.h"

#include "core/dtype.h"
#include "kernels/mla.h"
#include "kernels/select.h"

static void test_kmla(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmla");
  brisk_backend *cpu = cpu_reference();
  for (int iter = 0; iter < 16; iter++) {
    const uint32_t dtype = iter % 2 ? BRISK_DTYPE_F16 : BRISK_DTYPE_F32;
    brisk_mla_params p = {rand_int(&r, 1, 5),     2 * rand_int(&r, 1, 48), rand_int(&r, 1, 20),
                          2 * rand_int(&r, 1, 8), rand_int(&r, 1, 20),     0.3f};
    const int32_t half = (p.rank + p.rope_dim) / 2, bs = rand_int(&r, 1, 8);
    const int32_t len = rand_int(&r, 1, 70), nb = (len + bs - 1) / bs + 2;
    const int32_t dq = p.nope_dim + p.rope_dim;
    brisk_kv_layout kv = {dtype, nb, 1, bs, half};
    const size_t elt = dtype == BRISK_DTYPE_F32 ? 4 : 2, pool = (size_t)nb * bs * half * elt;
    unsigned char *kc = calloc(1, pool), *vc = calloc(1, pool), *kc2 = calloc(1, pool),
                  *vc2 = calloc(1, pool);
    int32_t *table = malloc((size_t)nb * sizeof *table);
    for (int32_t b = 0; b < nb; b++) table[b] = nb - 1 - b; /* reversed blocks */
    float *lat = rand_floats(&r, (size_t)len * p.rank, 1.0);
    float *kr = rand_floats(&r, (size_t)len * p.rope_dim, 1.0);
    int64_t *slots = malloc((size_t)len * sizeof *slots);
    for (int32_t t = 0; t < len; t++) slots[t] = (int64_t)table[t / bs] * bs + t % bs;
    assert_int_equal(cpu->mla_kv_write(cpu, &kv, kc, vc, lat, kr, slots, len, &p), BRISK_OK);
    brisk_kmla_desc d = {dtype == BRISK_DTYPE_F32 ? 0u : 1u,
                         bs,
                         p.n_heads,
                         p.rank,
                         p.nope_dim,
                         p.rope_dim,
                         p.v_dim,
                         p.scale,
                         len,
                         nb};
    ASSERT_LAUNCH(brisk_kmla_kv_write(&d, kc2, vc2, lat, kr, slots, NULL));
    assert_memory_equal(kc, kc2, pool);
    assert_memory_equal(vc, vc2, pool);
    /* Every position of the sequence as a query. */
    float *q = rand_floats(&r, (size_t)len * p.n_heads * dq, 1.0);
    float *kvb = rand_floats(&r, (size_t)p.n_heads * (p.nope_dim + p.v_dim) * p.rank,
                             1.0 / sqrt((double)p.rank));
    int32_t *pos = malloc((size_t)len * sizeof *pos), *seq = calloc((size_t)len, sizeof *seq);
    for (int32_t t = 0; t < len; t++) pos[t] = t;
    const size_t on = (size_t)len * p.n_heads * p.v_dim;
    float *want = malloc(on * sizeof *want), *got = malloc(on * sizeof *got);
    float *one = malloc((size_t)p.n_heads * p.v_dim * sizeof *one);
    brisk_attn_batch b = {len, pos, seq, table, 1, nb};
    assert_int_equal(cpu->mla_attention(cpu, &kv, kc, vc, q, kvb, &b, &p, want), BRISK_OK);
    ASSERT_LAUNCH(brisk_kmla_attention(&d, kc2, vc2, q, kvb, pos, seq, table, got, NULL));
    /* float32 dots of rank + rope terms and sums over len keys in other
     * orders: a few hundred ulps of values of order one. */
    ASSERT_CLOSE(got, want, on, 2e-5, 1e-4, "mla_attention case %d", iter);
    const int32_t t1 = rand_int(&r, 0, len - 1);
    brisk_kmla_desc d1 = d;
    d1.n_tokens = 1;
    ASSERT_LAUNCH(brisk_kmla_attention(&d1, kc2, vc2, q + (size_t)t1 * p.n_heads * dq, kvb,
                                       pos + t1, seq, table, one, NULL));
    ASSERT_BITS_EQUAL(one, got + (size_t)t1 * p.n_heads * p.v_dim, (size_t)p.n_heads * p.v_dim,
                      "query %d alone, case %d", t1, iter);
    free(kc), free(vc), free(kc2), free(vc2), free(table), free(lat), free(kr), free(slots);
    free(q), free(kvb), free(pos), free(seq), free(want), free(got), free(one);
  }
  brisk_backend_free(cpu);
}

static void test_kmoe_route_group(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kmoe_route_group");
  brisk_backend *cpu = cpu_reference();
  for (int iter = 0; iter < 30; iter++) {
    const int32_t ng = rand_int(&r, 1, 8), per = rand_int(&r, 1, 20), ne = ng * per;
    const int32_t kg = rand_int(&r, 1, ng), k = rand_int(&r, 1, kg * per < 16 ? kg * per : 16);
    const int32_t nt = rand_int(&r, 1, 100);
    float *x = rand_floats(&r, (size_t)nt * ne, 1.0);
    for (int32_t i = 0; i < nt * ne; i += 7) x[i] = 0.5f; /* ties */
    int32_t *ids = malloc((size_t)nt * k * sizeof *ids), *ids2 = malloc((size_t)nt * k * 4);
    float *w = malloc((size_t)nt * k * sizeof *w), *w2 = malloc((size_t)nt * k * sizeof *w2);
    assert_int_equal(cpu->moe_route_group(cpu, x, nt, ne, k, ng, kg, iter % 2, ids, w), BRISK_OK);
    ASSERT_LAUNCH(brisk_kmoe_route_group(x, nt, ne, k, ng, kg, iter % 2, ids2, w2, NULL));
    assert_memory_equal(ids, ids2, (size_t)nt * k * sizeof *ids);
    ASSERT_CLOSE(w2, w, (size_t)nt * k, 0, 1e-6, "route_group weights case %d", iter);
    free(x), free(ids), free(ids2), free(w), free(w2);
  }
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kmla),
      cmocka_unit_test(test_kmoe_route_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
