/* Elementwise operations, grid-stride over elements:
 *   glu:   out[i] = g / (1 + exp(-z)) * up[i], z = g (SwiGLU) or
 *          z = 2 sqrt(2/pi) (g + 0.044715 g^3) (GeGLU, tanh form:
 *          0.5 g (1 + tanh(a)) = g sigmoid(2a))
 *   add:   out[r][i] = a[r][i] + b[r][i] (or b[i], a broadcast bias)
 *   scale: out[i] = x[i] * s
 *   softcap: out[i] = cap * tanh(x[i] / cap)
 *   sigmoid_gate: out[r][i] = x[r][i] * 1 / (1 + exp(-g[r]))
 * add and scale are one rounding each, so they equal the CPU backend bit for
 * bit; glu uses the accurate expf (2 ulp on the device), not __expf. */
#include "simt.h"

#include "eltwise.h"

#define GELU_2K 1.5957691216057308f /* 2 * sqrt(2 / pi) */
#define GELU_C 0.044715f
#define ELT_THREADS 256
#define MAX_GRID 65535u

static dim3 grid_for(int64_t n) {
  int64_t blocks = (n + ELT_THREADS - 1) / ELT_THREADS;
  return dim3((unsigned)(blocks < (int64_t)MAX_GRID ? blocks : MAX_GRID));
}

template <bool GELU>
static __global__ void glu_kernel(const float *gate, const float *up, int64_t n,
                                  float *out /* [n] */) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float g = gate[i];
    /* Products rounded one by one, as the CPU's scalar path. */
    const float z =
        GELU ? __fmul_rn(GELU_2K, __fadd_rn(g, __fmul_rn(__fmul_rn(__fmul_rn(GELU_C, g), g), g)))
             : g;
    out[i] = __fmul_rn(g / (1.0f + expf(-z)), up[i]);
  }
}

extern "C" int brisk_kglu(int kind, const float *gate, const float *up, int64_t n, float *out,
                          brisk_kstream stream) {
  if (n <= 0) return 0;
  return kind == BRISK_KGLU_GEGLU ? BRISK_LAUNCH(glu_kernel<true>, grid_for(n), dim3(ELT_THREADS),
                                                 0, stream, gate, up, n, out)
                                  : BRISK_LAUNCH(glu_kernel<false>, grid_for(n), dim3(ELT_THREADS),
                                                 0, stream, gate, up, n, out);
}

/* Rows on grid.y (striding past 65535), columns on grid.x and the threads. */
static __global__ void add_kernel(const float *a, const float *b, int64_t n_rows, int64_t n_cols,
                                  bool broadcast_b, float *out /* [n_rows][n_cols] */) {
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
    const float *ar = a + r * n_cols, *br = broadcast_b ? b : b + r * n_cols;
    float *o = out + r * n_cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_cols;
         i += (int64_t)gridDim.x * blockDim.x)
      o[i] = ar[i] + br[i];
  }
}

extern "C" int brisk_kadd(const float *a, const float *b, int64_t n_rows, int64_t n_cols,
                          bool broadcast_b, float *out, brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  dim3 grid = grid_for(n_cols);
  grid.y = (unsigned)(n_rows < (int64_t)MAX_GRID ? n_rows : MAX_GRID);
  return BRISK_LAUNCH(add_kernel, grid, dim3(ELT_THREADS), 0, stream, a, b, n_rows, n_cols,
                      broadcast_b, out);
}

static __global__ void scale_kernel(const float *x, int64_t n, float s, float *out /* [n] */) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = x[i] * s;
}

extern "C" int brisk_kscale(const float *x, int64_t n, float s, float *out, brisk_kstream stream) {
  if (n <= 0) return 0;
  return BRISK_LAUNCH(scale_kernel, grid_for(n), dim3(ELT_THREADS), 0, stream, x, n, s, out);
}

static __global__ void softcap_kernel(const float *x, int64_t n, float cap, float *out /* [n] */) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __fmul_rn(cap, tanhf(__fdiv_rn(x[i], cap)));
}

extern "C" int brisk_ksoftcap(const float *x, int64_t n, float cap, float *out,
                              brisk_kstream stream) {
  if (n <= 0) return 0;
  return BRISK_LAUNCH(softcap_kernel, grid_for(n), dim3(ELT_THREADS), 0, stream, x, n, cap, out);
}

/* Rows on grid.y, as add. */
static __global__ void sigmoid_gate_kernel(const float *x, const float *g, int64_t n_rows,
                                           int64_t n_cols, float *out /* [n_rows][n_cols] */) {
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
    const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g[r])));
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_cols;
         i += (int64_t)gridDim.x * blockDim.x)
      out[r * n_cols + i] = __fmul_rn(x[r * n_cols + i], s);
  }
}

extern "C" int brisk_ksigmoid_gate(const float *x, const float *g, int64_t n_rows, int64_t n_cols,
                                   float *out, brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  dim3 grid = grid_for(n_cols);
  grid.y = (unsigned)(n_rows < (int64_t)MAX_GRID ? n_rows : MAX_GRID);
  return BRISK_LAUNCH(sigmoid_gate_kernel, grid, dim3(ELT_THREADS), 0, stream, x, g, n_rows, n_cols,
                      out);
}
