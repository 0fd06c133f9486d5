/* RoPE against a float64 reference written from the published formulas:
 * GGML "normal" (adjacent pairs) and NeoX (halves) layouts; no scaling,
 * linear, Llama 3.1 (HF _compute_llama3_parameters) and YaRN (HF
 * _compute_yarn_parameters: ramp-mixed interpolation/extrapolation, and cos
 * and sin times attn_factor * (0.1 ln(factor) + 1), the llama.cpp
 * ggml_rope_yarn convention with ext_factor scaling the ramp). */
#include "ops_test.h"

typedef struct rope_case {
  brisk_rope_params p;
  int32_t head_dim, n_heads, n_tokens;
  int64_t stride;
} rope_case;

/* HF find_correction_dim / find_correction_range. */
static double corr_dim(double n_rot_turns, int dim, double base, double orig) {
  return dim * log(orig / (n_rot_turns * 2 * M_PI)) / (2 * log(base));
}

/* Frequency of pair i, written as the HF reference code reads. */
static double ref_inv_freq(const brisk_rope_params *p, int i, double *mscale) {
  const int dim = p->n_rot;
  double pos_freq = pow(p->freq_base, 2.0 * i / dim);
  double extrap = 1.0 / pos_freq;
  if (p->freq_factors) extrap /= p->freq_factors[i];
  *mscale = 1;
  switch (p->scaling) {
  case BRISK_ROPE_SCALING_NONE: return extrap;
  case BRISK_ROPE_SCALING_LINEAR: return extrap / p->factor;
  case BRISK_ROPE_SCALING_LLAMA3: {
    double low_wl = p->orig_ctx / (double)p->low_freq_factor;
    double high_wl = p->orig_ctx / (double)p->high_freq_factor;
    double wl = 2 * M_PI / extrap;
    if (wl < high_wl) return extrap;
    if (wl > low_wl) return extrap / p->factor;
    double smooth = (p->orig_ctx / wl - p->low_freq_factor) /
                    ((double)p->high_freq_factor - p->low_freq_factor);
    return (1 - smooth) * extrap / p->factor + smooth * extrap;
  }
  case BRISK_ROPE_SCALING_YARN: {
    double interp = extrap / p->factor;
    double low = floor(corr_dim(p->beta_fast, dim, p->freq_base, p->orig_ctx));
    double high = ceil(corr_dim(p->beta_slow, dim, p->freq_base, p->orig_ctx));
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    double ramp = (i - low) / (high - low);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    double extrap_factor = (1 - ramp) * p->ext_factor;
    *mscale = p->attn_factor * (p->factor > 1 ? 0.1 * log(p->factor) + 1 : 1);
    return interp * (1 - extrap_factor) + extrap * extrap_factor;
  }
  case BRISK_ROPE_SCALING_LONGROPE: /* HF: 1 / (ext_factor * base^(2i/dim)) */
    *mscale = p->attn_factor;
    return extrap;
  }
  fail();
  return 0;
}

static void run_case(ops_paths *P, test_rng *r, const rope_case *c) {
  size_t n = (size_t)(c->n_tokens * c->stride);
  float *x = rand_floats(r, n, 1.5), *y = malloc(n * sizeof *y);
  int32_t *pos = malloc(c->n_tokens * sizeof *pos);
  int32_t max_pos = rand_int(r, 0, 3) == 0 ? 600000 : 40000;
  for (int32_t t = 0; t < c->n_tokens; t++) pos[t] = rand_int(r, 0, max_pos);
  pos[0] = 0;
  double *want = malloc(n * sizeof *want), *tol = malloc(n * sizeof *tol);
  const int half = c->p.n_rot / 2;
  for (size_t i = 0; i < n; i++) want[i] = x[i], tol[i] = 0; /* untouched: exact */
  for (int32_t t = 0; t < c->n_tokens; t++) {
    for (int32_t h = 0; h < c->n_heads; h++) {
      size_t base = (size_t)(t * c->stride + (int64_t)h * c->head_dim);
      for (int i = 0; i < half; i++) {
        double ms;
        double theta = pos[t] * ref_inv_freq(&c->p, i, &ms);
        size_t a = base + (c->p.layout == BRISK_ROPE_NEOX ? i : 2 * i);
        size_t b = base + (c->p.layout == BRISK_ROPE_NEOX ? i + half : 2 * i + 1);
        double x0 = x[a], x1 = x[b];
        want[a] = (x0 * cos(theta) - x1 * sin(theta)) * ms;
        want[b] = (x1 * cos(theta) + x0 * sin(theta)) * ms;
        /* cos/sin rounded to float, two products and a sum, each <= half
         * an ulp: 3 ulp of the pair's magnitude is a safe bound. */
        tol[a] = tol[b] = 3 * 0x1p-24 * (fabs(x0) + fabs(x1)) * ms;
      }
    }
  }
  for (int b = 0; b < P->n; b++) {
    memcpy(y, x, n * sizeof *y);
    brisk_backend *be = P->be[b];
    assert_int_equal(be->rope(be, y, c->n_tokens, c->stride, c->n_heads, c->head_dim, pos, &c->p),
                     BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      if (!(fabs(y[i] - want[i]) <= tol[i])) {
        fprintf(stderr,
                "%s rope layout %d scaling %d head_dim %d n_rot %d: element %zu got %.9g want "
                "%.9g (tol %.3g)\n",
                be->name, c->p.layout, c->p.scaling, c->head_dim, c->p.n_rot, i, y[i], want[i],
                tol[i]);
        fail();
      }
    }
  }
  free(x), free(y), free(pos), free(want), free(tol);
}

static void test_rope_all_modes(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("rope");
  const int32_t head_dims[] = {64, 128, 48, 6, 80, 256};
  const float bases[] = {10000.0f, 500000.0f, 1000000.0f};
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (int layout = 0; layout <= 1; layout++) {
      for (int scaling = 0; scaling <= 4; scaling++) {
        for (size_t hi = 0; hi < sizeof head_dims / sizeof *head_dims; hi++) {
          rope_case c;
          brisk_rope_params_init(&c.p);
          c.head_dim = head_dims[hi];
          c.p.layout = (brisk_rope_layout)layout;
          c.p.scaling = (brisk_rope_scaling)scaling;
          /* Full rotation mostly; partial (as in Phi/StableLM) sometimes. */
          c.p.n_rot = rand_int(&r, 0, 2) ? c.head_dim : 2 * rand_int(&r, 1, c.head_dim / 2);
          c.p.freq_base = bases[rand_int(&r, 0, 2)];
          c.p.factor = (float)test_rng_uniform(&r, 1.5, 40);
          c.p.orig_ctx = 1 << rand_int(&r, 11, 15);
          c.p.low_freq_factor = (float)test_rng_uniform(&r, 0.5, 2);
          c.p.high_freq_factor = c.p.low_freq_factor + (float)test_rng_uniform(&r, 0.5, 6);
          c.p.ext_factor = rand_int(&r, 0, 1) ? 1.0f : (float)test_rng_uniform(&r, 0.2, 1);
          c.p.attn_factor = rand_int(&r, 0, 1) ? 1.0f : (float)test_rng_uniform(&r, 0.5, 1.5);
          c.p.beta_fast = rand_int(&r, 0, 1) ? 32.0f : (float)test_rng_uniform(&r, 8, 64);
          c.p.beta_slow = rand_int(&r, 0, 1) ? 1.0f : (float)test_rng_uniform(&r, 0.5, 2);
          float ff[BRISK_MAX_HEAD_DIM / 2];
          /* Per-pair factors, as GGUF rope_freqs; LongRoPE's always have them. */
          if (scaling == BRISK_ROPE_SCALING_LONGROPE || rand_int(&r, 0, 3) == 0) {
            for (int i = 0; i < c.p.n_rot / 2; i++) ff[i] = (float)test_rng_uniform(&r, 1, 8);
            c.p.freq_factors = ff;
          }
          c.n_heads = rand_int(&r, 1, 5);
          c.n_tokens = rand_int(&r, 1, 40);
          c.stride =
              (int64_t)c.n_heads * c.head_dim + (rand_int(&r, 0, 1) ? 0 : rand_int(&r, 1, 70));
          run_case(&P, &r, &c);
        }
      }
    }
    ops_paths_close(&P);
  }
}

/* The llama3 rule's three bands and YaRN's ramp do occur with these
 * defaults: check the frequencies land where the formulas say. */
static void test_rope_frequency_bands(void **state) {
  (void)state;
  brisk_rope_params p;
  brisk_rope_params_init(&p);
  p.n_rot = 128;
  p.freq_base = 500000;
  p.scaling = BRISK_ROPE_SCALING_LLAMA3;
  p.factor = 8;
  p.orig_ctx = 8192;
  double f[64], ms;
  assert_int_equal(brisk_rope_frequencies(&p, 128, f, &ms), BRISK_OK);
  int kept = 0, divided = 0, smoothed = 0;
  for (int i = 0; i < 64; i++) {
    double b = pow(500000, -2.0 * i / 128);
    if (f[i] == b)
      kept++;
    else if (fabs(f[i] - b / 8) <= 1e-15 * b)
      divided++;
    else
      smoothed++, assert_true(f[i] > b / 8 && f[i] < b);
  }
  assert_true(kept > 0 && divided > 0 && smoothed > 0);
  assert_true(ms == 1);
  p.scaling = BRISK_ROPE_SCALING_YARN;
  p.factor = 4;
  p.orig_ctx = 4096;
  p.freq_base = 10000;
  assert_int_equal(brisk_rope_frequencies(&p, 128, f, &ms), BRISK_OK);
  assert_true(fabs(ms - (0.1 * log(4.0) + 1)) < 1e-12);
  assert_true(f[0] == 1.0); /* high frequency: extrapolated */
  assert_true(fabs(f[63] - pow(10000, -126.0 / 128) / 4) < 1e-15); /* low: interpolated */
}

static void test_rope_bad_arguments(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  float x[64] = {1};
  int32_t pos[2] = {0, 1};
  brisk_rope_params p;
  brisk_rope_params_init(&p);
  p.n_rot = 8;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_OK);
  assert_int_equal(be->rope(be, x, 2, 15, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rope(be, x, 2, 16, 0, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, NULL, &p), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rope(be, x, 2, 4096, 2, 2048, pos, &p), BRISK_E_INVALID_ARGUMENT);
  pos[1] = -1;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "negative position"));
  pos[1] = 1;
  p.n_rot = 7;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.n_rot = 10;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.n_rot = 8;
  p.freq_base = 0;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.freq_base = 10000;
  p.scaling = BRISK_ROPE_SCALING_LLAMA3;
  p.high_freq_factor = p.low_freq_factor;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.high_freq_factor = 4;
  p.factor = 0;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.factor = 2;
  p.scaling = BRISK_ROPE_SCALING_YARN;
  p.orig_ctx = 0;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.orig_ctx = 4096;
  float ff[4] = {1, 1, 0, 1};
  p.freq_factors = ff;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.freq_factors = NULL;
  p.scaling = BRISK_ROPE_SCALING_LONGROPE;
  p.attn_factor = 0;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  p.attn_factor = 1;
  p.scaling = (brisk_rope_scaling)9;
  assert_int_equal(be->rope(be, x, 2, 16, 2, 8, pos, &p), BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rope_all_modes),
      cmocka_unit_test(test_rope_frequency_bands),
      cmocka_unit_test(test_rope_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
