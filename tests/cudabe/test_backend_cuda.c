/* The CUDA backend against the CPU backend, operation by operation through
 * the backend table, on fresh random inputs: odd sizes and tails, every
 * RoPE mode, quantized weights and tables, GQA ratios, block tables with
 * holes, sliding windows, F16 and F32 caches, decode and prefill batches;
 * and out of device memory as a status with nothing leaked.
 *
 * It runs on "cudaemu:0" (the CUDA backend's host code and kernels over the
 * SIMT emulation) in the normal suite, and on a real GPU with
 * BRISK_TEST_DEVICE=cuda:0 (tests/gpu/run.sh).
 *
 * Tolerances: the device sums in another order than the CPU (warp
 * butterflies, split-KV chunks), so results agree to float rounding of
 * sums, stated per operation as a bound relative to the sum of the
 * magnitudes that entered each output (a backward-error bound: n * eps
 * times that sum, with n the terms per output); gathers, copies, selection
 * and KV writes are compared bit for bit. */
#include "cuda_emu.h"
#include "test_support.h"

#include "../backend/ops/mla_ref.h"

#include "backend/cpu/ops/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/device.h"
#include "core/dtype.h"
#include "core/half.h"
#include "quant/quant.h"
#include "quant/kv_quant.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
  brisk_backend *cpu, *dev;
  test_rng rng;
} fixture;

static const char *device_name(void) {
  const char *d = getenv("BRISK_TEST_DEVICE");
  return d && *d ? d : "cudaemu:0";
}

static int setup(void **state) {
  static fixture f;
  if (brisk_cuda_emu_register()) return -1;
  brisk_device_ref d;
  if (brisk_device_parse(device_name(), &d)) {
    fprintf(stderr, "device %s: %s\n", device_name(), brisk_last_error());
    return -1;
  }
  if (brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &f.cpu) ||
      brisk_device_backend_create(&d, NULL, &f.dev)) {
    fprintf(stderr, "backends: %s\n", brisk_last_error());
    return -1;
  }
  f.rng = test_rng_seeded("backend_cuda");
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  brisk_backend_free(f->dev);
  brisk_backend_free(f->cpu);
  return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static void *up(fixture *f, const void *host, size_t bytes) {
  void *d = NULL;
  if (f->dev->buffer_alloc(f->dev, bytes ? bytes : 1, &d))
    fail_msg("alloc: %s", brisk_last_error());
  if (bytes && f->dev->upload(f->dev, d, host, bytes)) fail_msg("upload: %s", brisk_last_error());
  return d;
}

static void *down(fixture *f, const void *dev, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  if (bytes && f->dev->download(f->dev, h, dev, bytes))
    fail_msg("download: %s", brisk_last_error());
  return h;
}

static void dfree(fixture *f, void *d) { f->dev->buffer_free(f->dev, d); }

static float *rand_floats(fixture *f, size_t n, double lo, double hi) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)test_rng_uniform(&f->rng, lo, hi);
  return x;
}

static int rand_int(fixture *f, int lo, int hi) { /* [lo, hi] */
  return lo + (int)(test_rng_u64(&f->rng) % (uint64_t)(hi - lo + 1));
}

/* |got - want| <= tol * scale[i] + tiny, each element; scale NULL: |want|. */
static void expect_close(const char *what, const float *got, const float *want, const float *scale,
                         size_t n, double tol) {
  for (size_t i = 0; i < n; i++) {
    double s = scale ? scale[i] : fabs((double)want[i]);
    double bound = tol * s + 1e-30;
    if (!(fabs((double)got[i] - (double)want[i]) <= bound))
      fail_msg("%s: element %zu is %.9g, the CPU's %.9g (bound %.3g)", what, i, (double)got[i],
               (double)want[i], bound);
  }
}

static void expect_same(const char *what, const void *got, const void *want, size_t bytes) {
  if (memcmp(got, want, bytes) != 0) {
    const unsigned char *a = got, *b = want;
    size_t i = 0;
    while (a[i] == b[i]) i++;
    fail_msg("%s: byte %zu differs (%u vs the CPU's %u)", what, i, a[i], b[i]);
  }
}

/* ---- elementwise, norms, softmax ----------------------------------------------- */

static void test_rmsnorm(void **state) {
  fixture *f = *state;
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 64}, {2, 257}, {4, 4099}, {1, 8192}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t r = shapes[s][0], c = shapes[s][1];
    size_t n = (size_t)(r * c);
    float *x = rand_floats(f, n, -3, 3), *w = rand_floats(f, (size_t)c, -2, 2);
    float *want = malloc(n * 4);
    for (int weighted = 0; weighted < 2; weighted++) {
      assert_int_equal(f->cpu->rmsnorm(f->cpu, x, weighted ? w : NULL, r, c, 1e-5f, want), 0);
      float *dx = up(f, x, n * 4), *dw = up(f, w, (size_t)c * 4), *dout = up(f, x, n * 4);
      assert_int_equal(f->dev->rmsnorm(f->dev, dx, weighted ? dw : NULL, r, c, 1e-5f, dout), 0);
      float *got = down(f, dout, n * 4);
      /* One rounding of the scale from a sum of c squares. */
      expect_close("rmsnorm", got, want, NULL, n, 4e-6 + 2e-7 * sqrt((double)c));
      free(got);
      dfree(f, dx);
      dfree(f, dw);
      dfree(f, dout);
    }
    free(x);
    free(w);
    free(want);
  }
  /* Checks are the CPU's: a bad eps is refused the same way. */
  assert_int_equal(f->dev->rmsnorm(f->dev, (float *)8, NULL, 1, 1, -1.0f, (float *)8),
                   BRISK_E_INVALID_ARGUMENT);
}

static void test_eltwise(void **state) {
  fixture *f = *state;
  const int64_t sizes[] = {1, 7, 64, 1000, 4097};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int64_t n = sizes[s];
    size_t bytes = (size_t)n * 4;
    float *a = rand_floats(f, (size_t)n, -6, 6), *b = rand_floats(f, (size_t)n, -6, 6);
    float *want = malloc(bytes);
    float *da = up(f, a, bytes), *db = up(f, b, bytes), *dout = up(f, a, bytes);
    for (int kind = 0; kind < 2; kind++) {
      assert_int_equal(f->cpu->glu(f->cpu, (brisk_glu_kind)kind, a, b, n, want), 0);
      assert_int_equal(f->dev->glu(f->dev, (brisk_glu_kind)kind, da, db, n, dout), 0);
      float *got = down(f, dout, bytes);
      /* exp/tanh differ by a few ulps between libm and the device, and the
       * float roundings of the sigmoid's argument z move the result by
       * about |z| ulps relative (d log sigmoid(z) / dz <= 1): at g = -5
       * GeGLU's z is -18, so the bound grows with |z|. */
      float *gscale = malloc(bytes);
      for (int64_t i = 0; i < n; i++) {
        const double g = a[i],
                     z = kind ? 2 * sqrt(2 / 3.14159265358979323846) * (g + 0.044715 * g * g * g)
                              : g;
        gscale[i] = (float)(fabs((double)want[i]) * (1 + fabs(z)));
      }
      expect_close(kind ? "geglu" : "swiglu", got, want, gscale, (size_t)n, 4e-6);
      free(gscale);
      free(got);
    }
    assert_int_equal(f->cpu->scale(f->cpu, a, n, 0.37f, want), 0);
    assert_int_equal(f->dev->scale(f->dev, da, n, 0.37f, dout), 0);
    float *got = down(f, dout, bytes);
    expect_same("scale", got, want, bytes);
    free(got);
    assert_int_equal(f->cpu->softcap(f->cpu, a, n, 2.5f, want), 0);
    assert_int_equal(f->dev->softcap(f->dev, da, n, 2.5f, dout), 0);
    got = down(f, dout, bytes);
    expect_close("softcap", got, want, NULL, (size_t)n, 4e-7);
    free(got);
    assert_int_equal(f->dev->softcap(f->dev, da, n, -1.0f, dout), BRISK_E_INVALID_ARGUMENT);
    /* The encoder operations: exact GELU, and LayerNorm with a bias over
     * rows of 7 (or 1). erfc and the float sums differ by ulps. */
    assert_int_equal(f->cpu->gelu(f->cpu, a, n, want), 0);
    assert_int_equal(f->dev->gelu(f->dev, da, n, dout), 0);
    got = down(f, dout, bytes);
    expect_close("gelu", got, want, NULL, (size_t)n, 4e-6);
    free(got);
    int64_t lcols = n % 7 == 0 ? 7 : 1, lrows = n / lcols;
    assert_int_equal(f->cpu->layernorm(f->cpu, a, b, b, lrows, lcols, 1e-5f, want), 0);
    assert_int_equal(f->dev->layernorm(f->dev, da, db, db, lrows, lcols, 1e-5f, dout), 0);
    got = down(f, dout, bytes);
    /* Weight and bias are both b: element j is b[j] (z + 1), |z| < 3. */
    float *lscale = malloc(bytes);
    for (int64_t i = 0; i < lrows * lcols; i++) lscale[i] = 4 * fabsf(b[i % lcols]);
    expect_close("layernorm", got, want, lscale, (size_t)(lrows * lcols), 4e-6);
    free(lscale);
    free(got);
    assert_int_equal(f->dev->layernorm(f->dev, da, NULL, NULL, 1, 1, -1.0f, dout),
                     BRISK_E_INVALID_ARGUMENT);
    /* sigmoid_gate: rows of a gated by b's first entries. */
    int64_t gcols = n % 7 == 0 ? 7 : 1, grows = n / gcols;
    assert_int_equal(f->cpu->sigmoid_gate(f->cpu, a, b, grows, gcols, want), 0);
    assert_int_equal(f->dev->sigmoid_gate(f->dev, da, db, grows, gcols, dout), 0);
    got = down(f, dout, bytes);
    expect_close("sigmoid_gate", got, want, NULL, (size_t)(grows * gcols), 4e-7);
    free(got);
    /* add as rows, and with a broadcast bias. */
    int64_t cols = n % 5 == 0 ? 5 : 1, rows = n / cols;
    assert_int_equal(f->cpu->add(f->cpu, a, b, rows, cols, false, want), 0);
    assert_int_equal(f->dev->add(f->dev, da, db, rows, cols, false, dout), 0);
    got = down(f, dout, bytes);
    expect_same("add", got, want, bytes);
    free(got);
    assert_int_equal(f->cpu->add(f->cpu, a, b, rows, cols, true, want), 0);
    assert_int_equal(f->dev->add(f->dev, da, db, rows, cols, true, dout), 0);
    got = down(f, dout, bytes);
    expect_same("add (broadcast)", got, want, bytes);
    free(got);
    dfree(f, da);
    dfree(f, db);
    dfree(f, dout);
    free(a);
    free(b);
    free(want);
  }
}

static void test_softmax(void **state) {
  fixture *f = *state;
  const int64_t shapes[][2] = {{1, 1}, {3, 5}, {2, 33}, {4, 1000}, {1, 32001}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t r = shapes[s][0], c = shapes[s][1];
    size_t n = (size_t)(r * c);
    float *x = rand_floats(f, n, -20, 20), *want = malloc(n * 4);
    assert_int_equal(f->cpu->softmax(f->cpu, x, r, c, 0.7f, want), 0);
    float *dx = up(f, x, n * 4), *dout = up(f, x, n * 4);
    assert_int_equal(f->dev->softmax(f->dev, dx, r, c, 0.7f, dout), 0);
    float *got = down(f, dout, n * 4);
    expect_close("softmax", got, want, NULL, n, 1e-5 + 1e-7 * sqrt((double)c));
    free(got);
    dfree(f, dx);
    dfree(f, dout);
    free(x);
    free(want);
  }
}

static void test_rope(void **state) {
  fixture *f = *state;
  const brisk_rope_scaling modes[] = {BRISK_ROPE_SCALING_NONE, BRISK_ROPE_SCALING_LINEAR,
                                      BRISK_ROPE_SCALING_LLAMA3, BRISK_ROPE_SCALING_YARN,
                                      BRISK_ROPE_SCALING_LONGROPE};
  for (int layout = 0; layout < 2; layout++)
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
      int32_t hd = (int32_t[]){64, 80, 128, 6, 96}[m], nh = rand_int(f, 1, 5);
      int32_t n_tok = rand_int(f, 1, 9);
      int64_t stride = (int64_t)nh * hd + rand_int(f, 0, 3) * 8; /* a view into qkv */
      brisk_rope_params p;
      brisk_rope_params_init(&p);
      p.layout = (brisk_rope_layout)layout;
      p.n_rot = m == 1 ? hd / 2 : hd;
      p.freq_base = m == 2 ? 500000.0f : 10000.0f;
      p.scaling = modes[m];
      p.factor = m == 0 ? 1.0f : 4.0f;
      p.orig_ctx = 2048;
      float ff[64]; /* LongRoPE's per-pair factors, and its magnitude */
      if (modes[m] == BRISK_ROPE_SCALING_LONGROPE) {
        p.n_rot = hd / 2;
        for (int i = 0; i < p.n_rot / 2; i++) ff[i] = 1.0f + (float)rand_int(f, 0, 40) / 4.0f;
        p.freq_factors = ff;
        p.attn_factor = 1.19f;
      }
      size_t n = (size_t)n_tok * (size_t)stride;
      float *x = rand_floats(f, n, -2, 2);
      int32_t *pos = malloc((size_t)n_tok * sizeof *pos);
      for (int32_t t = 0; t < n_tok; t++) pos[t] = rand_int(f, 0, 100000);
      float *want = malloc(n * 4);
      memcpy(want, x, n * 4);
      assert_int_equal(f->cpu->rope(f->cpu, want, n_tok, stride, nh, hd, pos, &p), 0);
      float *dx = up(f, x, n * 4);
      assert_int_equal(f->dev->rope(f->dev, dx, n_tok, stride, nh, hd, pos, &p), 0);
      float *got = down(f, dx, n * 4);
      /* Angles up to 1e5 rad: sin/cos of the same float angle, a few ulps of
       * the rotated pair's magnitude; untouched lanes bit for bit. */
      float *mag = malloc(n * 4);
      for (size_t i = 0; i < n; i++) mag[i] = 4.0f;
      expect_close("rope", got, want, mag, n, 2e-6);
      free(mag);
      free(got);
      dfree(f, dx);
      free(x);
      free(want);
      free(pos);
    }
}

/* ---- gathers, selection --------------------------------------------------------- */

/* A [rows][cols] table of `type` from random floats (quantized by lib/quant). */
static void *make_table(fixture *f, uint32_t type, int64_t rows, int64_t cols, size_t *bytes) {
  uint64_t rb;
  assert_true(brisk_dtype_row_bytes(type, (uint64_t)cols, &rb));
  *bytes = (size_t)rb * (size_t)rows;
  unsigned char *t = malloc(*bytes);
  float *row = malloc((size_t)cols * 4);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < cols; i++) row[i] = (float)test_rng_uniform(&f->rng, -1, 1);
    if (type == BRISK_DTYPE_F32)
      memcpy(t + r * rb, row, rb);
    else
      assert_int_equal(brisk_quantize_row(type, row, t + r * rb, cols), 0);
  }
  free(row);
  return t;
}

static void test_embed(void **state) {
  fixture *f = *state;
  const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
                            BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    int64_t nv = rand_int(f, 1, 50), ne = brisk_dtype_get(types[i])->block_size * rand_int(f, 1, 3);
    if (ne < 8) ne = 8 * rand_int(f, 1, 9) + (types[i] == BRISK_DTYPE_F32 ? 3 : 0);
    size_t bytes;
    void *table = make_table(f, types[i], nv, ne, &bytes);
    int32_t nt = rand_int(f, 1, 12);
    int32_t *tok = malloc((size_t)nt * 4);
    for (int32_t t = 0; t < nt; t++) tok[t] = rand_int(f, 0, (int)nv - 1);
    size_t out_bytes = (size_t)nt * (size_t)ne * 4;
    float *want = malloc(out_bytes);
    assert_int_equal(f->cpu->embed(f->cpu, types[i], table, nv, ne, tok, nt, want), 0);
    void *dt = up(f, table, bytes);
    float *dout = up(f, want, out_bytes);
    if (f->dev->embed(f->dev, types[i], dt, nv, ne, tok, nt, dout))
      fail_msg("embed %s: %s", brisk_dtype_name(types[i]), brisk_last_error());
    float *got = down(f, dout, out_bytes);
    expect_same(brisk_dtype_name(types[i]), got, want, out_bytes);
    tok[0] = (int32_t)nv; /* out of range: refused, like the CPU */
    assert_int_equal(f->dev->embed(f->dev, types[i], dt, nv, ne, tok, nt, dout),
                     BRISK_E_INVALID_ARGUMENT);
    free(got);
    dfree(f, dt);
    dfree(f, dout);
    free(table);
    free(tok);
    free(want);
  }
}

/* gather_cols (GPTQ act-order) through the table: the float64 reference
 * x[r][cols[j]] exactly (and so the CPU's result), for a permutation and a
 * gather with repeats; a bad index is refused before anything runs. */
static void test_gather_cols(void **state) {
  fixture *f = *state;
  for (int iter = 0; iter < 4; iter++) {
    const int64_t nc = rand_int(f, 1, 900), rows = rand_int(f, 1, 9);
    const bool perm = iter % 2 == 0;
    const int64_t no = perm ? nc : rand_int(f, 1, 600);
    int32_t *cols = malloc((size_t)no * sizeof *cols);
    for (int64_t j = 0; j < no; j++) cols[j] = perm ? (int32_t)j : rand_int(f, 0, (int)nc - 1);
    for (int64_t j = no - 1; perm && j > 0; j--) { /* Fisher-Yates */
      int64_t i = rand_int(f, 0, (int)j);
      int32_t t = cols[j];
      cols[j] = cols[i];
      cols[i] = t;
    }
    float *x = rand_floats(f, (size_t)(rows * nc), -4, 4);
    const size_t out_bytes = (size_t)(rows * no) * sizeof(float);
    float *want = malloc(out_bytes), *cpu = malloc(out_bytes);
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < no; j++) want[i * no + j] = (float)(double)x[i * nc + cols[j]];
    assert_int_equal(f->cpu->gather_cols(f->cpu, x, rows, nc, cols, no, cpu), BRISK_OK);
    expect_same("gather_cols (cpu)", cpu, want, out_bytes);
    float *dx = up(f, x, (size_t)(rows * nc) * sizeof(float)), *dout = up(f, want, out_bytes);
    memset(cpu, 0, out_bytes);
    assert_int_equal(f->dev->upload(f->dev, dout, cpu, out_bytes), BRISK_OK);
    if (f->dev->gather_cols(f->dev, dx, rows, nc, cols, no, dout))
      fail_msg("gather_cols: %s", brisk_last_error());
    float *got = down(f, dout, out_bytes);
    expect_same("gather_cols", got, want, out_bytes);
    cols[no - 1] = (int32_t)nc; /* out of range: refused, like the CPU */
    assert_int_equal(f->dev->gather_cols(f->dev, dx, rows, nc, cols, no, dout),
                     BRISK_E_INVALID_ARGUMENT);
    free(got);
    dfree(f, dx);
    dfree(f, dout);
    free(cols), free(x), free(want), free(cpu);
  }
}

static void test_select(void **state) {
  fixture *f = *state;
  const int64_t shapes[][2] = {{1, 1}, {3, 17}, {2, 1000}, {5, 32000}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t r = shapes[s][0], c = shapes[s][1];
    size_t n = (size_t)(r * c);
    float *x = rand_floats(f, n, -5, 5);
    if (c > 3) {
      x[1] = x[2] = 9.0f; /* a tie: the lower index first */
      x[c + 0] = NAN;     /* NaN ranks below every number */
    }
    float *dx = up(f, x, n * 4);
    int32_t *want = malloc((size_t)r * 64 * 4), *dids = up(f, want, (size_t)r * 64 * 4);
    float *wvals = malloc((size_t)r * 64 * 4), *dvals = up(f, wvals, (size_t)r * 64 * 4);
    assert_int_equal(f->cpu->argmax(f->cpu, x, r, c, want), 0);
    assert_int_equal(f->dev->argmax(f->dev, dx, r, c, dids), 0);
    int32_t *got = down(f, dids, (size_t)r * 4);
    expect_same("argmax", got, want, (size_t)r * 4);
    free(got);
    for (int32_t k = 1; k <= 64 && k <= c; k = k * 3 + 1) {
      assert_int_equal(f->cpu->top_k(f->cpu, x, r, c, k, want, wvals), 0);
      assert_int_equal(f->dev->top_k(f->dev, dx, r, c, k, dids, dvals), 0);
      got = down(f, dids, (size_t)r * (size_t)k * 4);
      float *gv = down(f, dvals, (size_t)r * (size_t)k * 4);
      expect_same("top_k ids", got, want, (size_t)r * (size_t)k * 4);
      expect_same("top_k values", gv, wvals, (size_t)r * (size_t)k * 4);
      free(got);
      free(gv);
    }
    dfree(f, dx);
    dfree(f, dids);
    dfree(f, dvals);
    free(x);
    free(want);
    free(wvals);
  }
}

static void test_moe_route(void **state) {
  fixture *f = *state;
  for (int rep = 0; rep < 6; rep++) {
    int32_t nt = rand_int(f, 1, 9), ne = rand_int(f, 2, 64), k = rand_int(f, 1, ne < 8 ? ne : 8);
    size_t n = (size_t)nt * (size_t)ne;
    float *logits = rand_floats(f, n, -4, 4);
    int32_t *wi = malloc((size_t)nt * (size_t)k * 4), *gi = malloc((size_t)nt * (size_t)k * 4);
    float *ww = malloc((size_t)nt * (size_t)k * 4), *gw = malloc((size_t)nt * (size_t)k * 4);
    for (int renorm = 0; renorm < 2; renorm++) {
      assert_int_equal(f->cpu->moe_route(f->cpu, logits, nt, ne, k, renorm, wi, ww), 0);
      float *dl = up(f, logits, n * 4);
      /* ids and weights come back in host memory (backend.h). */
      assert_int_equal(f->dev->moe_route(f->dev, dl, nt, ne, k, renorm, gi, gw), 0);
      expect_same("moe ids", gi, wi, (size_t)nt * (size_t)k * 4);
      expect_close("moe weights", gw, ww, NULL, (size_t)nt * (size_t)k, 2e-6);
      dfree(f, dl);
    }
    free(logits);
    free(wi);
    free(gi);
    free(ww);
    free(gw);
  }
}

/* ---- matmul ---------------------------------------------------------------------- */

static void test_matmul(void **state) {
  fixture *f = *state;
  const uint32_t types[] = {BRISK_DTYPE_F32,  BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0, BRISK_DTYPE_Q5_1,
                            BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  const int64_t ms[] = {1, 2, 5, 8, 9, 17};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    int64_t bs = brisk_dtype_get(types[i])->block_size;
    int64_t k = bs >= 32 ? bs * rand_int(f, 1, 3) : rand_int(f, 1, 300);
    int64_t n = rand_int(f, 1, 70);
    size_t wbytes;
    void *w = make_table(f, types[i], n, k, &wbytes);
    brisk_weight_plan plan;
    if (f->dev->weight_plan(f->dev, types[i], n, k, true, &plan))
      fail_msg("plan %s: %s", brisk_dtype_name(types[i]), brisk_last_error());
    assert_int_equal(plan.mode, BRISK_WEIGHT_COPY);
    void *dw = NULL;
    if (f->dev->weight_prepare(f->dev, &plan, types[i], n, k, w, &dw))
      fail_msg("prepare %s: %s", brisk_dtype_name(types[i]), brisk_last_error());
    for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
      int64_t m = ms[j];
      float *x = rand_floats(f, (size_t)(m * k), -1, 1), *want = malloc((size_t)(m * n) * 4);
      assert_int_equal(f->cpu->matmul(f->cpu, types[i], w, n, k, x, m, want), 0);
      float *dx = up(f, x, (size_t)(m * k) * 4), *dy = up(f, want, (size_t)(m * n) * 4);
      if (f->dev->matmul(f->dev, plan.type, dw, n, k, dx, m, dy))
        fail_msg("matmul %s m %lld: %s", brisk_dtype_name(types[i]), (long long)m,
                 brisk_last_error());
      float *got = down(f, dy, (size_t)(m * n) * 4);
      /* Both sum k products of the same dequantized weights; the CPU rounds
       * the activations to 8 bits for the integer-dot types, so those agree
       * to that rounding: |x| <= 1, |w| <= 1 make k the magnitude sum. */
      float *scale = malloc((size_t)(m * n) * 4);
      for (int64_t e = 0; e < m * n; e++) scale[e] = (float)k;
      double tol = brisk_dtype_get(types[i])->quantized ? 2e-2 : 2e-6;
      if (types[i] == BRISK_DTYPE_BF16) tol = 1e-2; /* the CPU rounds x to bf16 */
      expect_close(brisk_dtype_name(types[i]), got, want, scale, (size_t)(m * n), tol);
      free(scale);
      free(got);
      dfree(f, dx);
      dfree(f, dy);
      free(x);
      free(want);
    }
    dfree(f, dw);
    free(w);
  }
  /* A type without device kernels is refused when planned, naming it. */
  brisk_weight_plan plan;
  assert_int_equal(f->dev->weight_plan(f->dev, BRISK_DTYPE_Q2_K, 4, 256, true, &plan),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "q2_k"));
  /* An unprepared weight is refused by matmul. */
  assert_int_equal(
      f->dev->matmul(f->dev, BRISK_DTYPE_F32, (void *)64, 1, 1, (float *)64, 1, (float *)64),
      BRISK_E_UNSUPPORTED);
}

/* The GEMM path (lib/backend/cuda/cuda_gemm.c) for calls of many rows:
 * x rounded to the compute type (F16 for F16 weights, BF16 otherwise), the
 * weights dequantized in tiles of 128 rows (a small tile bound, so several
 * tiles and a tail), F32 accumulation. Checked three ways, each bound
 * relative to s = sum |w| |x| over the k products of an output:
 *  - against a float64 product of the same rounded operands: only the F32
 *    summation differs, |d| <= 2 k 2^-24 s;
 *  - against the GEMV path on the same weights (the documented tolerance
 *    between prefill on the GEMM path and decode on the GEMV kernels):
 *    |d| <= (u_x + u_w + 2 k 2^-24) s, u the unit roundoff of the compute
 *    type (2^-8 BF16, 2^-11 F16) for x and for w, u_w 0 when the weights
 *    are exact in it (F16, BF16);
 *  - against the CPU backend, to the CPU's own tolerance plus u_x. */
static double unit_roundoff(uint32_t ct) { return ct == BRISK_DTYPE_F16 ? 0x1p-11 : 0x1p-8; }

static float round_to(uint32_t ct, float v) {
  return ct == BRISK_DTYPE_F16 ? brisk_f16_to_f32(brisk_f32_to_f16(v))
                               : brisk_bf16_to_f32(brisk_f32_to_bf16(v));
}

static void test_matmul_gemm(void **state) {
  fixture *f = *state;
  const uint32_t types[] = {BRISK_DTYPE_F16,  BRISK_DTYPE_BF16, BRISK_DTYPE_Q8_0,
                            BRISK_DTYPE_Q4_0, BRISK_DTYPE_Q4_1, BRISK_DTYPE_Q5_0,
                            BRISK_DTYPE_Q4_K, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q6_K};
  const int64_t ms[] = {32, 45};
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    const uint32_t t = types[i];
    const uint32_t ct = t == BRISK_DTYPE_F16 ? BRISK_DTYPE_F16 : BRISK_DTYPE_BF16;
    int64_t bs = brisk_dtype_get(t)->block_size;
    int64_t k = bs >= 32 ? bs * rand_int(f, 1, 2) : 64 * rand_int(f, 1, 4);
    int64_t n = rand_int(f, 129, 300);
    brisk_backend_cuda_set_gemm(f->dev, 32, (size_t)(128 * k * 2));
    size_t wbytes;
    void *w = make_table(f, t, n, k, &wbytes);
    uint64_t rb;
    assert_true(brisk_dtype_row_bytes(t, (uint64_t)k, &rb));
    float *wf = malloc((size_t)(n * k) * 4);
    for (int64_t r = 0; r < n; r++)
      assert_int_equal(brisk_dequantize_row(t, (char *)w + r * rb, wf + r * k, k), 0);
    brisk_weight_plan plan;
    void *dw = NULL;
    assert_int_equal(f->dev->weight_plan(f->dev, t, n, k, true, &plan), 0);
    assert_int_equal(f->dev->weight_prepare(f->dev, &plan, t, n, k, w, &dw), 0);
    for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
      const int64_t m = ms[j];
      const size_t ny = (size_t)(m * n);
      float *x = rand_floats(f, (size_t)(m * k), -1, 1), *cpu = malloc(ny * 4);
      assert_int_equal(f->cpu->matmul(f->cpu, t, w, n, k, x, m, cpu), 0);
      float *dx = up(f, x, (size_t)(m * k) * 4), *dy = up(f, cpu, ny * 4);
      uint64_t calls = brisk_backend_cuda_gemm_calls(f->dev);
      if (f->dev->matmul(f->dev, plan.type, dw, n, k, dx, m, dy))
        fail_msg("gemm %s m %lld: %s", brisk_dtype_name(t), (long long)m, brisk_last_error());
      assert_int_equal(brisk_backend_cuda_gemm_calls(f->dev), calls + 1);
      float *gemm = down(f, dy, ny * 4);
      /* The same call below the threshold: the GEMV kernels. */
      brisk_backend_cuda_set_gemm(f->dev, 0, 0);
      assert_int_equal(f->dev->matmul(f->dev, plan.type, dw, n, k, dx, m, dy), 0);
      assert_int_equal(brisk_backend_cuda_gemm_calls(f->dev), calls + 1);
      brisk_backend_cuda_set_gemm(f->dev, 32, 0);
      float *gemv = down(f, dy, ny * 4);
      float *ref = malloc(ny * 4), *s = malloc(ny * 4);
      for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
          double acc = 0, mag = 0;
          for (int64_t e = 0; e < k; e++) {
            double a = round_to(ct, x[r * k + e]), b = round_to(ct, wf[c * k + e]);
            acc += a * b;
            mag += fabs((double)x[r * k + e] * wf[c * k + e]);
          }
          ref[r * n + c] = (float)acc;
          s[r * n + c] = (float)mag;
        }
      const double sum_tol = 2.0 * (double)k * 0x1p-24 + 0x1p-24;
      const double u = unit_roundoff(ct);
      const double u_w = (t == BRISK_DTYPE_F16 || t == BRISK_DTYPE_BF16) ? 0 : u;
      /* s is of the unrounded operands; the rounded ones are within (1 + u)^2. */
      expect_close("gemm vs float64 of its operands", gemm, ref, s, ny, sum_tol * (1 + 3 * u));
      expect_close("gemm vs gemv", gemm, gemv, s, ny, u + u_w + sum_tol);
      double cpu_tol = brisk_dtype_get(t)->quantized ? 2e-2 : t == BRISK_DTYPE_BF16 ? 1e-2 : 2e-6;
      expect_close("gemm vs cpu", gemm, cpu, s, ny, cpu_tol + u + u_w);
      free(ref);
      free(s);
      free(gemm);
      free(gemv);
      free(cpu);
      free(x);
      dfree(f, dx);
      dfree(f, dy);
    }
    dfree(f, dw);
    free(wf);
    free(w);
  }
  /* F32 weights stay on the GEMV kernels, whatever m. */
  uint64_t calls = brisk_backend_cuda_gemm_calls(f->dev);
  size_t wbytes;
  void *w = make_table(f, BRISK_DTYPE_F32, 40, 64, &wbytes);
  brisk_weight_plan plan;
  void *dw = NULL;
  assert_int_equal(f->dev->weight_plan(f->dev, BRISK_DTYPE_F32, 40, 64, true, &plan), 0);
  assert_int_equal(f->dev->weight_prepare(f->dev, &plan, BRISK_DTYPE_F32, 40, 64, w, &dw), 0);
  float *x = rand_floats(f, 64 * 64, -1, 1);
  float *dx = up(f, x, 64 * 64 * 4), *dy = up(f, x, 64 * 40 * 4);
  assert_int_equal(f->dev->matmul(f->dev, plan.type, dw, 40, 64, dx, 64, dy), 0);
  assert_int_equal(brisk_backend_cuda_gemm_calls(f->dev), calls);
  dfree(f, dx);
  dfree(f, dy);
  dfree(f, dw);
  free(x);
  free(w);
  brisk_backend_cuda_set_gemm(f->dev, 32, (size_t)32 << 20);
}

/* A row's result on the GEMM path does not depend on the other rows' values
 * or on m beyond the F32 summation order cuBLASLt may pick per shape (none
 * in the emulation): the first 33 rows of a 33-row and of a 77-row call,
 * whose other rows differ. */
static void test_gemm_rows_independent(void **state) {
  fixture *f = *state;
  const int64_t n = 150, k = 256, m1 = 33, m2 = 77;
  size_t wbytes;
  void *w = make_table(f, BRISK_DTYPE_Q4_K, n, k, &wbytes);
  brisk_weight_plan plan;
  void *dw = NULL;
  assert_int_equal(f->dev->weight_plan(f->dev, BRISK_DTYPE_Q4_K, n, k, true, &plan), 0);
  assert_int_equal(f->dev->weight_prepare(f->dev, &plan, BRISK_DTYPE_Q4_K, n, k, w, &dw), 0);
  float *x = rand_floats(f, (size_t)(m2 * k), -1, 1);
  float *dx = up(f, x, (size_t)(m2 * k) * 4), *dy = up(f, x, (size_t)(m2 * n) * 4);
  assert_int_equal(f->dev->matmul(f->dev, plan.type, dw, n, k, dx, m1, dy), 0);
  float *a = down(f, dy, (size_t)(m1 * n) * 4);
  assert_int_equal(f->dev->matmul(f->dev, plan.type, dw, n, k, dx, m2, dy), 0);
  float *b = down(f, dy, (size_t)(m1 * n) * 4);
  float *s = malloc((size_t)(m1 * n) * 4);
  for (int64_t e = 0; e < m1 * n; e++) s[e] = (float)k; /* |x|, |w| <= 1 */
  if (strncmp(device_name(), "cudaemu", 7) == 0)
    expect_same("gemm rows across m", a, b, (size_t)(m1 * n) * 4);
  else
    expect_close("gemm rows across m", a, b, s, (size_t)(m1 * n), 2.0 * (double)k * 0x1p-24);
  free(s);
  free(a);
  free(b);
  free(x);
  dfree(f, dx);
  dfree(f, dy);
  dfree(f, dw);
  free(w);
}

/* ---- KV cache and attention -------------------------------------------------------- */

typedef struct attn_case {
  uint32_t dtype;
  int32_t head_dim, n_kv_heads, group, block_size, window, n_seqs, max_len;
  bool decode;   /* one query per sequence, at its end */
  float softcap; /* > 0: scores soft-capped (Gemma 2) */
} attn_case;

static void run_attention(fixture *f, const attn_case *c) {
  const int32_t hd = c->head_dim, nkv = c->n_kv_heads, bs = c->block_size, nh = nkv * c->group;
  int32_t len[8], total = 0, max_blocks = 1;
  for (int s = 0; s < c->n_seqs; s++) {
    len[s] = rand_int(f, 1, c->max_len);
    int32_t nb = (len[s] + bs - 1) / bs;
    total += nb;
    if (nb + 1 > max_blocks) max_blocks = nb + 1;
  }
  const int32_t n_blocks = total + 3; /* blocks no table uses: holes */
  brisk_kv_layout kv = {c->dtype, n_blocks, nkv, bs, hd};
  int32_t *perm = malloc((size_t)n_blocks * 4);
  for (int32_t i = 0; i < n_blocks; i++) perm[i] = i;
  for (int32_t i = n_blocks - 1; i > 0; i--) {
    int32_t j = rand_int(f, 0, i), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int32_t *tables = malloc((size_t)c->n_seqs * (size_t)max_blocks * 4);
  int32_t next = 0;
  for (int s = 0; s < c->n_seqs; s++)
    for (int32_t b = 0; b < max_blocks; b++)
      tables[s * max_blocks + b] = b < (len[s] + bs - 1) / bs ? perm[next++] : -7;
  /* Every token's K/V, written through both backends' kv_write. */
  int32_t n_all = 0;
  for (int s = 0; s < c->n_seqs; s++) n_all += len[s];
  size_t row = (size_t)nkv * (size_t)hd;
  float *k = rand_floats(f, (size_t)n_all * row, -1, 1),
        *v = rand_floats(f, (size_t)n_all * row, -1, 1);
  int64_t *slots = malloc((size_t)n_all * 8);
  int32_t *tpos = malloc((size_t)n_all * 4), *tseq = malloc((size_t)n_all * 4);
  for (int s = 0, i = 0; s < c->n_seqs; s++)
    for (int32_t p = 0; p < len[s]; p++, i++) {
      slots[i] = (int64_t)tables[s * max_blocks + p / bs] * bs + p % bs;
      tpos[i] = p;
      tseq[i] = s;
    }
  size_t cache_bytes =
      (size_t)n_blocks * (size_t)nkv * (size_t)bs * brisk_kvq_row_bytes(c->dtype, hd);
  void *kc = calloc(1, cache_bytes), *vc = calloc(1, cache_bytes);
  void *dkc = up(f, kc, cache_bytes), *dvc = up(f, vc, cache_bytes); /* both zeros */
  void *dk = up(f, k, (size_t)n_all * row * 4), *dv = up(f, v, (size_t)n_all * row * 4);
  assert_int_equal(f->cpu->kv_write(f->cpu, &kv, kc, vc, k, v, slots, n_all), 0);
  if (f->dev->kv_write(f->dev, &kv, dkc, dvc, dk, dv, slots, n_all))
    fail_msg("kv_write: %s", brisk_last_error());
  void *gk = down(f, dkc, cache_bytes), *gv = down(f, dvc, cache_bytes);
  expect_same("kv_write K", gk, kc, cache_bytes);
  expect_same("kv_write V", gv, vc, cache_bytes);
  free(gk);
  free(gv);
  /* Queries: the last token of each sequence (decode), or all (prefill). */
  int32_t nq = 0, *qpos = malloc((size_t)n_all * 4), *qseq = malloc((size_t)n_all * 4);
  for (int32_t i = 0; i < n_all; i++)
    if (!c->decode || i + 1 == n_all || tseq[i + 1] != tseq[i]) {
      qpos[nq] = tpos[i];
      qseq[nq++] = tseq[i];
    }
  size_t qbytes = (size_t)nq * (size_t)nh * (size_t)hd * 4;
  float *q = rand_floats(f, qbytes / 4, -1, 1), *want = malloc(qbytes);
  brisk_attn_batch ab = {nq, qpos, qseq, tables, c->n_seqs, max_blocks};
  brisk_attn_params ap = {nh, 0.0f, c->window, c->softcap};
  if (c->dtype == BRISK_KVQ_DTYPE_Q8) {
    /* The CPU reads an INT8 cache with an INT8-quantized query; this
     * backend keeps the float query, whose reference is the F32 cache of
     * the dequantized rows. */
    const size_t n_rows = (size_t)n_blocks * (size_t)nkv * (size_t)bs;
    const size_t rb = brisk_kvq_row_bytes(c->dtype, hd);
    float *kf = malloc(n_rows * (size_t)hd * 4), *vf = malloc(n_rows * (size_t)hd * 4);
    for (size_t r = 0; r < n_rows; r++) {
      brisk_kvq_dequantize_row(c->dtype, (const uint8_t *)kc + r * rb, kf + r * (size_t)hd, hd);
      brisk_kvq_dequantize_row(c->dtype, (const uint8_t *)vc + r * rb, vf + r * (size_t)hd, hd);
    }
    brisk_kv_layout kv32 = {BRISK_DTYPE_F32, n_blocks, nkv, bs, hd};
    assert_int_equal(f->cpu->attention(f->cpu, &kv32, kf, vf, q, &ab, &ap, want), 0);
    free(kf), free(vf);
  } else {
    assert_int_equal(f->cpu->attention(f->cpu, &kv, kc, vc, q, &ab, &ap, want), 0);
  }
  float *dq = up(f, q, qbytes), *dout = up(f, want, qbytes);
  if (f->dev->attention(f->dev, &kv, dkc, dvc, dq, &ab, &ap, dout))
    fail_msg("attention: %s", brisk_last_error());
  float *got = down(f, dout, qbytes);
  /* A convex combination of |v| <= 1 values; weights from exp of dot
   * products of head_dim terms, summed in another order. */
  float *scale = malloc(qbytes);
  for (size_t i = 0; i < qbytes / 4; i++) scale[i] = 1.0f;
  char what[96];
  snprintf(what, sizeof what, "attention (%s, hd %d, gqa %d, bs %d, window %d, softcap %g, %s)",
           brisk_kvq_name(c->dtype)      ? brisk_kvq_name(c->dtype)
           : c->dtype == BRISK_DTYPE_F16 ? "f16"
                                         : "f32",
           hd, c->group, bs, c->window, (double)c->softcap, c->decode ? "decode" : "prefill");
  expect_close(what, got, want, scale, qbytes / 4, 2e-5 + 1e-6 * sqrt((double)c->max_len));
  /* Copy-on-write: block copies into blocks no table uses, bit for bit. */
  int32_t pairs[4] = {tables[0], perm[n_blocks - 1], tables[0], perm[n_blocks - 2]};
  assert_int_equal(f->cpu->kv_copy_blocks(f->cpu, &kv, kc, pairs, 2), 0);
  assert_int_equal(f->dev->kv_copy_blocks(f->dev, &kv, dkc, pairs, 2), 0);
  gk = down(f, dkc, cache_bytes);
  expect_same("kv_copy_blocks", gk, kc, cache_bytes);
  free(gk);
  free(scale);
  free(got);
  dfree(f, dq);
  dfree(f, dout);
  dfree(f, dkc);
  dfree(f, dvc);
  dfree(f, dk);
  dfree(f, dv);
  free(q);
  free(want);
  free(kc);
  free(vc);
  free(k);
  free(v);
  free(slots);
  free(tpos);
  free(tseq);
  free(qpos);
  free(qseq);
  free(tables);
  free(perm);
}

static void test_attention(void **state) {
  fixture *f = *state;
  const attn_case cases[] = {
      {BRISK_DTYPE_F32, 64, 2, 1, 16, 0, 3, 40, true, 0},
      {BRISK_DTYPE_F16, 64, 2, 4, 16, 0, 4, 300, true, 0},
      {BRISK_DTYPE_F16, 128, 1, 8, 32, 0, 2, 700, true, 0}, /* several split-KV chunks */
      {BRISK_DTYPE_F32, 80, 3, 2, 5, 7, 3, 50, true, 0},
      {BRISK_DTYPE_F16, 32, 2, 2, 4, 0, 2, 37, false, 0},
      {BRISK_DTYPE_F32, 96, 1, 3, 16, 9, 3, 45, false, 0},
      {BRISK_DTYPE_F16, 128, 4, 1, 16, 0, 1, 130, false, 0},
      {BRISK_DTYPE_F16, 64, 2, 2, 16, 8, 3, 60, true, 0.6f}, /* soft-capped scores */
      {BRISK_DTYPE_F32, 32, 2, 2, 8, 0, 2, 40, false, 0.6f},
      {BRISK_KVQ_DTYPE_Q8, 64, 2, 4, 16, 0, 3, 300, true, 0},
      {BRISK_KVQ_DTYPE_FP8, 128, 1, 8, 32, 0, 2, 300, true, 0},
      {BRISK_KVQ_DTYPE_Q8, 80, 2, 2, 5, 7, 2, 50, false, 0},
      {BRISK_KVQ_DTYPE_FP8, 64, 2, 1, 16, 0, 2, 60, false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_attention(f, &cases[i]);
}

/* Latent attention and group-limited routing against the float64
 * references of tests/backend/ops/mla_ref.h, as the CPU paths are. */
static void test_mla(void **state) {
  fixture *f = *state;
  for (int i = 0; i < 10; i++) {
    uint32_t dtype = i % 2 ? BRISK_DTYPE_F16 : BRISK_DTYPE_F32;
    double e = mla_check_case(f->dev, &f->rng, dtype);
    if (e > 2e-5) fail_msg("mla case %d (%s): error %.3g", i, brisk_dtype_name(dtype), e);
  }
  mla_check_refusals(f->dev);
  mla_check_route_group(f->dev, &f->rng);
}

/* ---- memory -------------------------------------------------------------------------- */

static void test_out_of_device_memory(void **state) {
  fixture *f = *state;
  if (strncmp(device_name(), "cudaemu", 7) != 0) skip(); /* the limit is the emulation's */
  size_t before = brisk_cuda_emu_in_use();
  brisk_cuda_emu_set_limit(before + 1000);
  void *p = NULL;
  assert_int_equal(f->dev->buffer_alloc(f->dev, 4096, &p), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "out of device memory"));
  size_t wbytes;
  void *w = make_table(f, BRISK_DTYPE_Q8_0, 64, 256, &wbytes);
  brisk_weight_plan plan;
  assert_int_equal(f->dev->weight_plan(f->dev, BRISK_DTYPE_Q8_0, 64, 256, true, &plan), 0);
  assert_int_equal(f->dev->weight_prepare(f->dev, &plan, BRISK_DTYPE_Q8_0, 64, 256, w, &p),
                   BRISK_E_OUT_OF_MEMORY);
  assert_int_equal(brisk_cuda_emu_in_use(), before); /* nothing leaked */
  brisk_cuda_emu_set_limit(SIZE_MAX);
  /* Still usable. */
  assert_int_equal(f->dev->weight_prepare(f->dev, &plan, BRISK_DTYPE_Q8_0, 64, 256, w, &p), 0);
  dfree(f, p);
  /* The GEMM path's scratch (activations, a weight tile) out of memory, on
   * a fresh backend that holds none yet: a status, and the next call works. */
  brisk_device_ref d;
  brisk_backend *be = NULL;
  assert_int_equal(brisk_device_parse(device_name(), &d), 0);
  assert_int_equal(brisk_device_backend_create(&d, NULL, &be), 0);
  void *dw = NULL, *dx = NULL, *dy = NULL;
  const int64_t m = 48;
  float *x = rand_floats(f, (size_t)(m * 256), -1, 1);
  assert_int_equal(be->weight_prepare(be, &plan, BRISK_DTYPE_Q8_0, 64, 256, w, &dw), 0);
  assert_int_equal(be->buffer_alloc(be, (size_t)(m * 256) * 4, &dx), 0);
  assert_int_equal(be->buffer_alloc(be, (size_t)(m * 64) * 4, &dy), 0);
  assert_int_equal(be->upload(be, dx, x, (size_t)(m * 256) * 4), 0);
  assert_int_equal(be->workspace_bytes(be), 0);
  brisk_cuda_emu_set_limit(brisk_cuda_emu_in_use() + 100);
  assert_int_equal(be->matmul(be, plan.type, dw, 64, 256, dx, m, dy), BRISK_E_OUT_OF_MEMORY);
  assert_non_null(strstr(brisk_last_error(), "out of device memory"));
  brisk_cuda_emu_set_limit(SIZE_MAX);
  assert_int_equal(be->matmul(be, plan.type, dw, 64, 256, dx, m, dy), 0);
  assert_int_equal(brisk_backend_cuda_gemm_calls(be), 1);
  be->buffer_free(be, dx);
  be->buffer_free(be, dy);
  be->buffer_free(be, dw);
  brisk_backend_free(be);
  free(x);
  free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm),     cmocka_unit_test(test_eltwise),
      cmocka_unit_test(test_softmax),     cmocka_unit_test(test_rope),
      cmocka_unit_test(test_embed),       cmocka_unit_test(test_select),
      cmocka_unit_test(test_moe_route),   cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_matmul_gemm), cmocka_unit_test(test_gemm_rows_independent),
      cmocka_unit_test(test_attention),   cmocka_unit_test(test_out_of_device_memory),
      cmocka_unit_test(test_mla),         cmocka_unit_test(test_gather_cols),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
