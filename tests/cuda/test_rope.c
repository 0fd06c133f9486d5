/* kernels/rope.cu against the CPU backend's rope: both layouts, partial
 * rotation (n_rot < head_dim), token-stride views into a fused qkv row,
 * positions up to ~1e5, and every scaling mode through the host-computed
 * frequencies (brisk_rope_frequencies, as the host side passes them). */
#include "cuda_test.h"

#include "kernels/rope.h"

#define ULP 0x1p-24

static void test_rope(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("cuda_rope");
  brisk_backend *cpu = NULL;
  /* The scalar path rounds like the kernel (no FMA); AVX2 would fuse. */
  assert_int_equal(brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_SCALAR, &cpu), BRISK_OK);
  const int32_t head_dims[] = {2, 6, 64, 80, 128, 256};
  for (int iter = 0; iter < 24; iter++) {
    brisk_rope_params p;
    brisk_rope_params_init(&p);
    const int32_t hd = head_dims[iter % 6];
    p.layout = iter % 2 ? BRISK_ROPE_NEOX : BRISK_ROPE_NORMAL;
    p.n_rot = iter % 3 == 0 ? hd : 2 * rand_int(&r, 1, hd / 2);
    p.freq_base = iter % 4 ? 10000.0f : 500000.0f;
    p.scaling = (brisk_rope_scaling)(iter / 2 % 4);
    p.factor = (float)test_rng_uniform(&r, 1, 16);
    p.orig_ctx = 4096;
    float ff[BRISK_MAX_HEAD_DIM / 2];
    if (iter % 5 == 0) {
      for (int i = 0; i < p.n_rot / 2; i++) ff[i] = (float)test_rng_uniform(&r, 0.5, 4);
      p.freq_factors = ff;
    }
    double inv_freq[BRISK_MAX_HEAD_DIM / 2], mscale;
    assert_int_equal(brisk_rope_frequencies(&p, hd, inv_freq, &mscale), BRISK_OK);
    const int32_t n_heads = rand_int(&r, 1, 9), n_tokens = rand_int(&r, 1, 13);
    const int64_t stride = (int64_t)n_heads * hd + (iter % 3 == 1 ? rand_int(&r, 1, 40) : 0);
    const size_t n = (size_t)(n_tokens * stride);
    float *x = rand_floats(&r, n, 2.0), *want = malloc(n * sizeof *want);
    int32_t *pos = malloc((size_t)n_tokens * sizeof *pos);
    for (int32_t t = 0; t < n_tokens; t++) pos[t] = rand_int(&r, 0, t % 2 ? 131072 : 64);
    memcpy(want, x, n * sizeof *want);
    assert_int_equal(cpu->rope(cpu, want, n_tokens, stride, n_heads, hd, pos, &p), BRISK_OK);
    double *tol = malloc(n * sizeof *tol);
    for (int32_t t = 0; t < n_tokens; t++)
      for (int32_t h = 0; h < n_heads; h++) {
        /* The same products and sums; the table's float64 cos/sin may
         * differ by an ulp of float64 on the device, rounding c or s to a
         * neighbouring float (1 ulp of mscale): 4 ulp of |x0| + |x1|. */
        const float *hp = x + t * stride + (int64_t)h * hd;
        double mx = 0;
        for (int32_t d = 0; d < hd; d++) mx = fabs(hp[d]) > mx ? fabs(hp[d]) : mx;
        for (int32_t d = 0; d < hd; d++)
          tol[t * stride + (int64_t)h * hd + d] = 8 * ULP * mx * mscale;
      }
    for (int32_t t = 0; t < n_tokens; t++) /* the gap of a view is untouched */
      for (int64_t d = (int64_t)n_heads * hd; d < stride; d++) tol[t * stride + d] = 0;
    double *dev_freq = inv_freq; /* emulation: device memory is host memory */
    ASSERT_LAUNCH(brisk_krope(x, n_tokens, stride, n_heads, hd, pos, (int32_t)p.layout, p.n_rot,
                              dev_freq, mscale, NULL));
    ASSERT_WITHIN(x, want, tol, n, "rope iter %d layout %d scaling %d hd %d n_rot %d", iter,
                  (int)p.layout, (int)p.scaling, hd, p.n_rot);
    free(x), free(want), free(pos), free(tol);
  }
  brisk_backend_free(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rope)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
