/* Row and elementwise operations of the CPU backend (rmsnorm, SwiGLU/GeGLU,
 * add, scale, softmax, embedding gather) against float64 references on fresh
 * random inputs, on both kernel paths and with and without threads. */
#include "ops_test.h"

#include "backend/cpu/ops/vec.h"
#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"

/* Column counts: tiny, odd, around the 8/32-lane boundaries, model sizes. */
static const int64_t COLS[] = {1, 3, 7, 8, 9, 31, 32, 33, 63, 100, 257, 1000, 2048, 4099};
#define N_COLS (sizeof COLS / sizeof *COLS)

static void test_rmsnorm(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("rmsnorm");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < N_COLS; ci++) {
      int64_t cols = COLS[ci], rows = rand_int(&r, 1, 9);
      size_t n = (size_t)(rows * cols);
      float *x = rand_floats(&r, n, test_rng_uniform(&r, 0.01, 10));
      float *w = rand_floats(&r, (size_t)cols, 1.0);
      float eps = (float)test_rng_uniform(&r, 1e-6, 1e-4);
      double *want = malloc(n * sizeof *want), *want_nw = malloc(n * sizeof *want);
      for (int64_t i = 0; i < rows; i++) {
        double ss = 0;
        for (int64_t j = 0; j < cols; j++) ss += (double)x[i * cols + j] * x[i * cols + j];
        double s = 1 / sqrt(ss / cols + eps);
        for (int64_t j = 0; j < cols; j++) {
          want[i * cols + j] = x[i * cols + j] * s * w[j];
          want_nw[i * cols + j] = x[i * cols + j] * s;
        }
      }
      float *y = malloc(n * sizeof *y), *xc = malloc(n * sizeof *xc);
      for (int b = 0; b < P.n; b++) {
        brisk_backend *be = P.be[b];
        /* Up to 32 float partial sums of squares (each relative error
         * <= cols/32 ulp, tiny for random data) plus three roundings. */
        assert_int_equal(be->rmsnorm(be, x, w, rows, cols, eps, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 2e-6, "%s rmsnorm [%lld][%lld]", be->name, (long long)rows,
                     (long long)cols);
        memcpy(xc, x, n * sizeof *xc); /* in place, no weight */
        assert_int_equal(be->rmsnorm(be, xc, NULL, rows, cols, eps, xc), BRISK_OK);
        ASSERT_CLOSE(xc, want_nw, n, 0, 2e-6, "%s rmsnorm no weight", be->name);
      }
      free(x), free(w), free(want), free(want_nw), free(y), free(xc);
    }
    ops_paths_close(&P);
  }
}

static double glu_ref(brisk_glu_kind kind, double g, double u) {
  if (kind == BRISK_GLU_SWIGLU) return g / (1 + exp(-g)) * u;
  /* 0.5 (1 + tanh(a)) written as 1 / (1 + exp(-2a)), the same function:
   * 1 + tanh(a) cancels catastrophically in float64 for a < -10. */
  double a = sqrt(2 / M_PI) * (g + 0.044715 * g * g * g);
  return g / (1 + exp(-2 * a)) * u;
}

static void test_glu(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("glu");
  const int64_t sizes[] = {1, 5, 8, 13, 64, 65, 1000, 11008, 70001};
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      int64_t n = sizes[si];
      /* Wide gates reach both saturated ends of the activations. */
      float *g = rand_floats(&r, (size_t)n, 4.0), *u = rand_floats(&r, (size_t)n, 1.0);
      if (n > 4) g[0] = -95.0f, g[1] = 95.0f, g[2] = -20.0f, g[3] = 1e-4f;
      float *y = malloc((size_t)n * sizeof *y);
      double *want = malloc((size_t)n * sizeof *want), *tol = malloc((size_t)n * sizeof *tol);
      for (int kind = 0; kind <= 1; kind++) {
        for (int64_t i = 0; i < n; i++) {
          want[i] = glu_ref((brisk_glu_kind)kind, g[i], u[i]);
          /* The sigmoid's argument z is rounded in float (a few ulp of |z|,
           * which is also that much relative error of exp(-z)); then exp
           * (<= 2 ulp), a division and two products. */
          /* Absolute 1e-35: the AVX2 exp saturates at e^88.3, so gates below
           * -88.3 give ~|g| 5e-39 instead of ~0. */
          double z = kind ? 1.5957691216057308 * (g[i] + 0.044715 * g[i] * g[i] * g[i]) : 0;
          tol[i] = (8 + 4 * fabs(z)) * 0x1p-24 * fabs(want[i]) + 1e-35;
        }
        for (int b = 0; b < P.n; b++) {
          brisk_backend *be = P.be[b];
          assert_int_equal(be->glu(be, (brisk_glu_kind)kind, g, u, n, y), BRISK_OK);
          ASSERT_WITHIN(y, want, tol, n, "%s glu kind %d n %lld", be->name, kind, (long long)n);
        }
      }
      /* In place over the gate. */
      float *gc = malloc((size_t)n * sizeof *gc);
      memcpy(gc, g, (size_t)n * sizeof *gc);
      for (int64_t i = 0; i < n; i++) want[i] = glu_ref(BRISK_GLU_SWIGLU, g[i], u[i]);
      assert_int_equal(P.be[P.n - 1]->glu(P.be[P.n - 1], BRISK_GLU_SWIGLU, gc, u, n, gc), BRISK_OK);
      ASSERT_CLOSE(gc, want, n, 1e-35, 8 * 0x1p-24, "glu in place"); /* swiglu: z = g exact */
      free(g), free(u), free(y), free(want), free(gc), free(tol);
    }
    ops_paths_close(&P);
  }
}

/* The thread split must not change a single bit (vector tails included). */
static void test_glu_softmax_split_invariant(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("split_invariant");
  ops_paths one = ops_paths_open(0), many = ops_paths_open(3);
  const int64_t n = 50003;
  float *g = rand_floats(&r, n, 3), *u = rand_floats(&r, n, 1);
  float *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
  for (int b = 0; b < one.n; b++) {
    assert_int_equal(one.be[b]->glu(one.be[b], BRISK_GLU_GEGLU, g, u, n, y1), BRISK_OK);
    assert_int_equal(many.be[b]->glu(many.be[b], BRISK_GLU_GEGLU, g, u, n, y2), BRISK_OK);
    assert_memory_equal(y1, y2, n * sizeof *y1);
    assert_int_equal(one.be[b]->softmax(one.be[b], g, 7, n / 7, 0.7f, y1), BRISK_OK);
    assert_int_equal(many.be[b]->softmax(many.be[b], g, 7, n / 7, 0.7f, y2), BRISK_OK);
    assert_memory_equal(y1, y2, (n / 7) * 7 * sizeof *y1);
    assert_int_equal(one.be[b]->rmsnorm(one.be[b], g, u, 7, n / 7, 1e-5f, y1), BRISK_OK);
    assert_int_equal(many.be[b]->rmsnorm(many.be[b], g, u, 7, n / 7, 1e-5f, y2), BRISK_OK);
    assert_memory_equal(y1, y2, (n / 7) * 7 * sizeof *y1);
  }
  free(g), free(u), free(y1), free(y2);
  ops_paths_close(&one);
  ops_paths_close(&many);
}

static void test_add_scale(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("add_scale");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < N_COLS; ci++) {
      int64_t cols = COLS[ci], rows = rand_int(&r, 1, 40);
      size_t n = (size_t)(rows * cols);
      float *a = rand_floats(&r, n, 2), *b = rand_floats(&r, n, 2),
            *bias = rand_floats(&r, cols, 1);
      float *y = malloc(n * sizeof *y);
      double *want = malloc(n * sizeof *want);
      float s = (float)test_rng_uniform(&r, -3, 3);
      for (int p = 0; p < P.n; p++) {
        brisk_backend *be = P.be[p];
        /* One float addition or product each: correctly rounded, so the
         * float64 reference rounded once must match up to half an ulp. */
        for (size_t i = 0; i < n; i++) want[i] = (double)a[i] + b[i];
        assert_int_equal(be->add(be, a, b, rows, cols, false, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 0x1p-24, "%s add", be->name);
        for (size_t i = 0; i < n; i++) want[i] = (double)a[i] + bias[i % cols];
        assert_int_equal(be->add(be, a, bias, rows, cols, true, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 0x1p-24, "%s add bias", be->name);
        for (size_t i = 0; i < n; i++) want[i] = (double)a[i] * s;
        assert_int_equal(be->scale(be, a, (int64_t)n, s, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 0x1p-24, "%s scale", be->name);
        /* softcap: a division, libm's tanhf and a product, each rounded. */
        float cap = (float)test_rng_uniform(&r, 0.5, 30);
        for (size_t i = 0; i < n; i++) want[i] = cap * tanh((double)a[i] / cap);
        assert_int_equal(be->softcap(be, a, (int64_t)n, cap, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 8 * 0x1p-24, "%s softcap %g", be->name, (double)cap);
        memcpy(y, a, n * sizeof *y);
        assert_int_equal(be->softcap(be, y, (int64_t)n, cap, y), BRISK_OK); /* in place */
        ASSERT_CLOSE(y, want, n, 0, 8 * 0x1p-24, "%s softcap in place", be->name);
        assert_int_equal(be->softcap(be, a, (int64_t)n, 0.0f, y), BRISK_E_INVALID_ARGUMENT);
        assert_int_equal(be->softcap(be, a, (int64_t)n, INFINITY, y), BRISK_E_INVALID_ARGUMENT);
        /* sigmoid_gate: expf (< 2 ulp), an addition, a division, a product. */
        for (size_t i = 0; i < n; i++)
          want[i] = (double)a[i] / (1 + exp(-(double)bias[(i / cols) % cols]));
        float *g = malloc((size_t)rows * sizeof *g);
        for (int64_t i = 0; i < rows; i++) g[i] = bias[i % cols];
        assert_int_equal(be->sigmoid_gate(be, a, g, rows, cols, y), BRISK_OK);
        ASSERT_CLOSE(y, want, n, 0, 8 * 0x1p-24, "%s sigmoid_gate", be->name);
        assert_int_equal(be->sigmoid_gate(be, a, NULL, rows, cols, y), BRISK_E_INVALID_ARGUMENT);
        free(g);
      }
      free(a), free(b), free(bias), free(y), free(want);
    }
    ops_paths_close(&P);
  }
}

static void test_softmax(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("softmax");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ci = 0; ci < N_COLS; ci++) {
      int64_t cols = COLS[ci], rows = rand_int(&r, 1, 6);
      size_t n = (size_t)(rows * cols);
      float *x = rand_floats(&r, n, 3);
      float scale = (float)test_rng_uniform(&r, 0.1, 3);
      double *want = malloc(n * sizeof *want), *tol = malloc(n * sizeof *tol);
      for (int64_t i = 0; i < rows; i++) {
        const float *xr = x + i * cols;
        double m = -INFINITY, sum = 0, sum_err = 0;
        for (int64_t j = 0; j < cols; j++) m = fmax(m, (double)xr[j] * scale);
        /* Each exponent x*scale - m is rounded twice in float: an absolute
         * error up to (|z| + |z - m|) 2^-24, which exp turns into that much
         * relative error. An output carries its own term's error plus the
         * row sum's, the weighted mean of all terms' errors; then exp
         * (<= 2 ulp), the reciprocal and the product. */
        for (int64_t j = 0; j < cols; j++) {
          double z = (double)xr[j] * scale, e = exp(z - m);
          sum += e;
          sum_err += e * (fabs(z) + fabs(z - m));
        }
        sum_err /= sum;
        for (int64_t j = 0; j < cols; j++) {
          double z = (double)xr[j] * scale;
          want[i * cols + j] = exp(z - m) / sum;
          tol[i * cols + j] =
              (fabs(z) + fabs(z - m) + sum_err + 8) * 0x1p-24 * want[i * cols + j] * 1.25 + 1e-38;
        }
      }
      float *y = malloc(n * sizeof *y);
      for (int b = 0; b < P.n; b++) {
        brisk_backend *be = P.be[b];
        assert_int_equal(be->softmax(be, x, rows, cols, scale, y), BRISK_OK);
        ASSERT_WITHIN(y, want, tol, n, "%s softmax [%lld][%lld]", be->name, (long long)rows,
                      (long long)cols);
        float *xc = malloc(n * sizeof *xc);
        memcpy(xc, x, n * sizeof *xc);
        assert_int_equal(be->softmax(be, xc, rows, cols, scale, xc), BRISK_OK);
        assert_memory_equal(xc, y, n * sizeof *y); /* in place: same bits */
        free(xc);
      }
      free(x), free(want), free(y), free(tol);
    }
    ops_paths_close(&P);
  }
}

#ifdef BRISK_HAVE_AVX2_KERNELS
BRISK_AVX2 static void exp8(const float *x, float *y) {
  _mm256_storeu_ps(y, brisk_avx2_exp(_mm256_loadu_ps(x)));
}
#endif

/* The AVX2 exp against float64 exp over its whole range. */
static void test_avx2_exp(void **state) {
  (void)state;
#ifdef BRISK_HAVE_AVX2_KERNELS
  brisk_backend *be = NULL;
  if (brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AVX2, &be) != BRISK_OK)
    SKIP_BECAUSE("no AVX2/FMA/F16C on this processor");
  brisk_backend_free(be);
  test_rng r = test_rng_seeded("avx2_exp");
  float x[8], y[8];
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    for (int k = 0; k < 8; k++) x[k] = (float)test_rng_uniform(&r, -87.3, 88.3);
    exp8(x, y);
    for (int k = 0; k < 8; k++) {
      double want = exp((double)x[k]);
      double rel = fabs(y[k] - want) / want;
      if (rel > worst) worst = rel;
    }
  }
  fprintf(stderr, "avx2 exp: worst relative error %.3g\n", worst);
  assert_true(worst < 3 * 0x1p-24); /* documented as about 2 ulp */
  const float special[8] = {-INFINITY, -1000, -87.5f, 0, 89, 1000, INFINITY, NAN};
  exp8(special, y);
  assert_true(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == 1);
  assert_true(isfinite(y[4]) && y[4] > 1e38f && isfinite(y[5]) && isfinite(y[6]));
  assert_true(isnan(y[7]));
#else
  SKIP_BECAUSE("AVX2 kernels are not built for this architecture");
#endif
}

/* Embedding rows: f32/f16/bf16 exactly; Q8_0 built by hand and decoded
 * from its definition (d * q); Q4_K compared to the reference dequantizer. */
static void test_embed(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("embed");
  const uint32_t types[] = {BRISK_DTYPE_F32, BRISK_DTYPE_F16, BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_K};
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
      uint32_t type = types[ti];
      int64_t bsz = brisk_dtype_get(type)->block_size;
      int64_t vocab = rand_int(&r, 1, 300), embd = bsz * rand_int(&r, 1, 12);
      if (bsz == 1) embd = rand_int(&r, 1, 700);
      uint64_t row_bytes;
      assert_true(brisk_dtype_row_bytes(type, (uint64_t)embd, &row_bytes));
      uint8_t *table = malloc((size_t)(row_bytes * vocab));
      double *rows = malloc((size_t)(vocab * embd) * sizeof *rows); /* decoded table */
      float *tmp = rand_floats(&r, (size_t)embd, 1);
      for (int64_t v = 0; v < vocab; v++) {
        uint8_t *dst = table + v * row_bytes;
        for (int64_t i = 0; i < embd; i++) tmp[i] = (float)test_rng_normal(&r);
        if (type == BRISK_DTYPE_F32) {
          memcpy(dst, tmp, embd * 4);
          for (int64_t i = 0; i < embd; i++) rows[v * embd + i] = tmp[i];
        } else if (type == BRISK_DTYPE_F16 || type == BRISK_DTYPE_BF16) {
          for (int64_t i = 0; i < embd; i++) {
            uint16_t h =
                type == BRISK_DTYPE_F16 ? brisk_f32_to_f16(tmp[i]) : brisk_f32_to_bf16(tmp[i]);
            memcpy(dst + 2 * i, &h, 2);
            rows[v * embd + i] =
                type == BRISK_DTYPE_F16 ? brisk_f16_to_f32(h) : brisk_bf16_to_f32(h);
          }
        } else if (type == BRISK_DTYPE_Q8_0) {
          for (int64_t blk = 0; blk < embd / 32; blk++) {
            uint8_t *b = dst + blk * 34;
            uint16_t d = brisk_f32_to_f16((float)test_rng_uniform(&r, 0.001, 0.05));
            memcpy(b, &d, 2);
            for (int i = 0; i < 32; i++) {
              int8_t q = (int8_t)rand_int(&r, -127, 127);
              memcpy(b + 2 + i, &q, 1);
              rows[v * embd + blk * 32 + i] = (double)brisk_f16_to_f32(d) * q;
            }
          }
        } else {
          assert_int_equal(brisk_quantize_row(type, tmp, dst, embd), BRISK_OK);
          float *dq = malloc(embd * sizeof *dq);
          assert_int_equal(brisk_dequantize_row(type, dst, dq, embd), BRISK_OK);
          for (int64_t i = 0; i < embd; i++) rows[v * embd + i] = dq[i];
          free(dq);
        }
      }
      int32_t n_tok = rand_int(&r, 1, 70);
      int32_t *tok = malloc(n_tok * sizeof *tok);
      for (int32_t t = 0; t < n_tok; t++) tok[t] = rand_int(&r, 0, (int)vocab - 1);
      tok[0] = (int32_t)vocab - 1;
      double *want = malloc((size_t)(n_tok * embd) * sizeof *want);
      for (int32_t t = 0; t < n_tok; t++)
        memcpy(want + t * embd, rows + tok[t] * embd, embd * sizeof *want);
      float *out = malloc((size_t)(n_tok * embd) * sizeof *out);
      for (int b = 0; b < P.n; b++) {
        assert_int_equal(P.be[b]->embed(P.be[b], type, table, vocab, embd, tok, n_tok, out),
                         BRISK_OK);
        /* Decoding is exact: each value is d * q or a stored float. */
        ASSERT_CLOSE(out, want, n_tok * embd, 0, 0, "embed %s", brisk_dtype_name(type));
        /* A token out of range is refused and nothing is written. */
        int32_t saved = tok[n_tok - 1];
        tok[n_tok - 1] = (int32_t)vocab;
        memset(out, 0x7f, (size_t)(n_tok * embd) * sizeof *out);
        assert_int_equal(P.be[b]->embed(P.be[b], type, table, vocab, embd, tok, n_tok, out),
                         BRISK_E_INVALID_ARGUMENT);
        assert_non_null(strstr(brisk_last_error(), "outside"));
        assert_true(((uint8_t *)out)[0] == 0x7f);
        tok[n_tok - 1] = -1;
        assert_int_equal(P.be[b]->embed(P.be[b], type, table, vocab, embd, tok, n_tok, out),
                         BRISK_E_INVALID_ARGUMENT);
        tok[n_tok - 1] = saved;
      }
      free(table), free(rows), free(tmp), free(tok), free(want), free(out);
    }
    ops_paths_close(&P);
  }
}

/* gather_cols (GPTQ act-order): a permutation of every width, and a
 * gather with repeats into another width, exactly equal to the float64
 * reference x[r][cols[j]], on every kernel path, threaded and not. */
static void test_gather_cols(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("gather_cols");
  for (int threads = 0; threads <= 2; threads += 2) {
    ops_paths P = ops_paths_open(threads);
    for (int trial = 0; trial < 12; trial++) {
      int64_t n_cols = rand_int(&r, 1, 700),
              rows = trial % 3 == 0 ? rand_int(&r, 200, 300) : rand_int(&r, 1, 9);
      bool perm = trial % 2 == 0;
      int64_t n_out = perm ? n_cols : rand_int(&r, 1, 900);
      int32_t *cols = malloc((size_t)n_out * sizeof *cols);
      assert_non_null(cols);
      if (perm) { /* Fisher-Yates */
        for (int64_t j = 0; j < n_cols; j++) cols[j] = (int32_t)j;
        for (int64_t j = n_cols - 1; j > 0; j--) {
          int64_t i = (int64_t)(test_rng_u64(&r) % (uint64_t)(j + 1));
          int32_t t = cols[j];
          cols[j] = cols[i];
          cols[i] = t;
        }
      } else {
        for (int64_t j = 0; j < n_out; j++)
          cols[j] = (int32_t)(test_rng_u64(&r) % (uint64_t)n_cols);
      }
      float *x = rand_floats(&r, (size_t)(rows * n_cols), 2);
      double *want = malloc((size_t)(rows * n_out) * sizeof *want);
      assert_non_null(want);
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n_out; j++) want[i * n_out + j] = (double)x[i * n_cols + cols[j]];
      for (int p = 0; p < P.n; p++) {
        brisk_backend *be = P.be[p];
        float *y = malloc((size_t)(rows * n_out) * sizeof *y);
        assert_non_null(y);
        assert_int_equal(be->gather_cols(be, x, rows, n_cols, cols, n_out, y), BRISK_OK);
        ASSERT_CLOSE(y, want, rows * n_out, 0, 0, "%s gather_cols [%lld][%lld] -> %lld", be->name,
                     (long long)rows, (long long)n_cols, (long long)n_out);
        free(y);
      }
      free(cols), free(x), free(want);
    }
    ops_paths_close(&P);
  }
}

/* Out-of-range and negative indices, NULLs, shapes and overlapping
 * buffers are refused, and nothing is written. */
static void test_gather_cols_bad(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  float x[2 * 8] = {0}, y[2 * 8];
  for (int i = 0; i < 16; i++) y[i] = 7;
  int32_t cols[8] = {7, 6, 5, 4, 3, 2, 1, 0};
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 8, y), BRISK_OK);
  for (int i = 0; i < 16; i++) y[i] = 7;
  cols[3] = 8;
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 8, y), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "cols[3] = 8 is outside [0, 8)"));
  cols[3] = -1;
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 8, y), BRISK_E_INVALID_ARGUMENT);
  cols[3] = 4;
  assert_int_equal(be->gather_cols(be, x, 2, 8, NULL, 8, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, NULL, 2, 8, cols, 8, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 8, NULL), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 0, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, x, -1, 8, cols, 8, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, x, 2, 0, cols, 8, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->gather_cols(be, x, 2, 8, cols, 8, x + 4), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "overlaps"));
  for (int i = 0; i < 16; i++) assert_true(y[i] == 7);
  assert_int_equal(be->gather_cols(be, x, 0, 8, cols, 8, NULL), BRISK_OK); /* no rows */
  ops_paths_close(&P);
}

static void test_bad_arguments(void **state) {
  (void)state;
  ops_paths P = ops_paths_open(0);
  brisk_backend *be = P.be[0];
  float x[16] = {1, 2, 3}, y[16];
  assert_int_equal(be->rmsnorm(be, x, NULL, 1, 0, 1e-5f, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rmsnorm(be, x, NULL, -1, 4, 1e-5f, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rmsnorm(be, NULL, NULL, 1, 4, 1e-5f, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rmsnorm(be, x, NULL, 1, 4, -1.0f, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->rmsnorm(be, x, NULL, INT64_MAX / 2, 4, 1e-5f, y), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "too large"));
  assert_int_equal(be->rmsnorm(be, x, NULL, 0, 4, 1e-5f, y), BRISK_OK); /* no rows: nothing */
  assert_int_equal(be->glu(be, (brisk_glu_kind)7, x, x, 4, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->glu(be, BRISK_GLU_SWIGLU, x, NULL, 4, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->glu(be, BRISK_GLU_SWIGLU, x, x, -4, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->softmax(be, x, 1, 4, NAN, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->add(be, x, NULL, 1, 4, false, y), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(be->scale(be, x, -1, 2.0f, y), BRISK_E_INVALID_ARGUMENT);
  int32_t tok = 0;
  assert_int_equal(be->embed(be, BRISK_DTYPE_I32, x, 4, 4, &tok, 1, y), BRISK_E_UNSUPPORTED);
  assert_int_equal(be->embed(be, BRISK_DTYPE_Q8_0, x, 4, 20, &tok, 1, y),
                   BRISK_E_INVALID_ARGUMENT); /* 20 is not a multiple of 32 */
  assert_int_equal(be->embed(be, 999, x, 4, 4, &tok, 1, y), BRISK_E_UNSUPPORTED);
  assert_int_equal(be->embed(be, BRISK_DTYPE_F32, x, 4, 4, &tok, -1, y), BRISK_E_INVALID_ARGUMENT);
  ops_paths_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm),
      cmocka_unit_test(test_glu),
      cmocka_unit_test(test_glu_softmax_split_invariant),
      cmocka_unit_test(test_add_scale),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_avx2_exp),
      cmocka_unit_test(test_embed),
      cmocka_unit_test(test_gather_cols),
      cmocka_unit_test(test_gather_cols_bad),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
