/* cuBLASLt behind the runtime table's GEMM entries (cuda_rt.h), for the
 * plugin.
 *
 * libcublasLt is opened with dlopen at the first gemm_open, not linked: the
 * plugin then loads on a machine that has the driver but not the CUDA
 * libraries, and such a machine gets the GEMV kernels for every matmul
 * (the backend logs why) instead of a plugin that fails to load. Only the
 * types and enums come from cublasLt.h at build time.
 *
 * The product is row-major C[m][ldc] = A[m][k] . B[n][k]^T, which in
 * cuBLASLt's column-major terms is C^T (n x m, ld ldc) = op(B) . A^T with B
 * read as a k x n matrix transposed (TN, the layout tensor cores prefer).
 * The preference allows no split-K reduction scheme, so that each output is
 * one dot product summed inside one thread block: its value depends on its
 * row of A and column of B only, never on the other rows' values, and the
 * same plan gives the same bits on every run. */
#include "backend/cuda/rt_cublaslt.h"

#include "core/dtype.h"

/* cublasLt.h declares some functions without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define LIBNAME "libcublasLt.so." STR(CUBLAS_VER_MAJOR)

static struct {
  pthread_once_t once;
  void *lib;
  char why[256];
  cublasStatus_t (*create)(cublasLtHandle_t *);
  cublasStatus_t (*destroy)(cublasLtHandle_t);
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *,
                             size_t);
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t,
                                  int64_t);
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                             const void *, size_t);
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t *, int *);
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                           cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                           const void *, const void *, cublasLtMatrixLayout_t, void *,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                           cudaStream_t);
  const char *(*status_string)(cublasStatus_t);
} lt = {.once = PTHREAD_ONCE_INIT};

static void load(void) {
  lt.lib = dlopen(LIBNAME, RTLD_NOW | RTLD_LOCAL);
  if (!lt.lib) {
    snprintf(lt.why, sizeof lt.why, "%s", dlerror());
    return;
  }
  struct {
    void **fn;
    const char *name;
  } syms[] = {
      {(void **)&lt.create, "cublasLtCreate"},
      {(void **)&lt.destroy, "cublasLtDestroy"},
      {(void **)&lt.desc_create, "cublasLtMatmulDescCreate"},
      {(void **)&lt.desc_destroy, "cublasLtMatmulDescDestroy"},
      {(void **)&lt.desc_set, "cublasLtMatmulDescSetAttribute"},
      {(void **)&lt.layout_create, "cublasLtMatrixLayoutCreate"},
      {(void **)&lt.layout_destroy, "cublasLtMatrixLayoutDestroy"},
      {(void **)&lt.pref_create, "cublasLtMatmulPreferenceCreate"},
      {(void **)&lt.pref_destroy, "cublasLtMatmulPreferenceDestroy"},
      {(void **)&lt.pref_set, "cublasLtMatmulPreferenceSetAttribute"},
      {(void **)&lt.heuristic, "cublasLtMatmulAlgoGetHeuristic"},
      {(void **)&lt.matmul, "cublasLtMatmul"},
      {(void **)&lt.status_string, "cublasLtGetStatusString"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    *syms[i].fn = dlsym(lt.lib, syms[i].name);
    if (!*syms[i].fn) {
      snprintf(lt.why, sizeof lt.why, "%s has no %s", LIBNAME, syms[i].name);
      dlclose(lt.lib);
      lt.lib = NULL;
      return;
    }
  }
}

static int code(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? 0 : BRISK_CUDA_GEMM_ERROR_BASE + (int)s;
}

const char *brisk_cuda_gemm_error_string(int e) {
  if (e == BRISK_CUDA_GEMM_ERROR_BASE + BRISK_CUDA_GEMM_NO_LIBRARY)
    return lt.why[0] ? lt.why : "cuBLASLt is not available";
  if (lt.status_string) return lt.status_string((cublasStatus_t)(e - BRISK_CUDA_GEMM_ERROR_BASE));
  return "cuBLASLt error";
}

bool brisk_cuda_gemm_is_oom(int e) {
  return e == BRISK_CUDA_GEMM_ERROR_BASE + (int)CUBLAS_STATUS_ALLOC_FAILED;
}

int brisk_cuda_gemm_open(void **handle) {
  pthread_once(&lt.once, load);
  if (!lt.lib) return BRISK_CUDA_GEMM_ERROR_BASE + BRISK_CUDA_GEMM_NO_LIBRARY;
  cublasLtHandle_t h = NULL;
  int e = code(lt.create(&h));
  if (!e) *handle = h;
  return e;
}

void brisk_cuda_gemm_close(void *handle) {
  if (handle && lt.lib) (void)lt.destroy((cublasLtHandle_t)handle);
}

typedef struct plan {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
} plan;

void brisk_cuda_gemm_plan_free(void *p) {
  plan *pl = p;
  if (!pl) return;
  if (pl->c) (void)lt.layout_destroy(pl->c);
  if (pl->b) (void)lt.layout_destroy(pl->b);
  if (pl->a) (void)lt.layout_destroy(pl->a);
  if (pl->op) (void)lt.desc_destroy(pl->op);
  free(pl);
}

int brisk_cuda_gemm_plan(void *handle, const brisk_cuda_gemm_shape *s, size_t ws, void **out) {
  if (!lt.lib) return BRISK_CUDA_GEMM_ERROR_BASE + BRISK_CUDA_GEMM_NO_LIBRARY;
  const cudaDataType_t t = s->type == BRISK_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
  plan *pl = calloc(1, sizeof *pl);
  if (!pl) return BRISK_CUDA_GEMM_ERROR_BASE + (int)CUBLAS_STATUS_ALLOC_FAILED;
  cublasLtMatmulPreference_t pref = NULL;
  const cublasOperation_t trans = CUBLAS_OP_T, none = CUBLAS_OP_N;
  const uint32_t no_split_k = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  /* First operand: B as k x n, transposed; second: A as k x m. */
  int e = code(lt.desc_create(&pl->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (!e) e = code(lt.desc_set(pl->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans));
  if (!e) e = code(lt.desc_set(pl->op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
  if (!e) e = code(lt.layout_create(&pl->b, t, (uint64_t)s->k, (uint64_t)s->n, s->k));
  if (!e) e = code(lt.layout_create(&pl->a, t, (uint64_t)s->k, (uint64_t)s->m, s->k));
  if (!e) e = code(lt.layout_create(&pl->c, CUDA_R_32F, (uint64_t)s->n, (uint64_t)s->m, s->ldc));
  if (!e) e = code(lt.pref_create(&pref));
  if (!e) e = code(lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  if (!e)
    e = code(lt.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_split_k,
                         sizeof no_split_k));
  if (!e)
    e = code(lt.heuristic((cublasLtHandle_t)handle, pl->op, pl->b, pl->a, pl->c, pl->c, pref, 1,
                          &res, &found));
  if (!e && found < 1) e = BRISK_CUDA_GEMM_ERROR_BASE + (int)CUBLAS_STATUS_NOT_SUPPORTED;
  if (pref) (void)lt.pref_destroy(pref);
  if (e) {
    brisk_cuda_gemm_plan_free(pl);
    return e;
  }
  pl->algo = res.algo;
  *out = pl;
  return 0;
}

int brisk_cuda_gemm_run(void *handle, const void *p, const void *a, const void *b, float *c,
                        void *ws, size_t ws_bytes, void *stream) {
  const plan *pl = p;
  const float one = 1.0f, zero = 0.0f;
  return code(lt.matmul((cublasLtHandle_t)handle, pl->op, &one, b, pl->b, a, pl->a, &zero, c, pl->c,
                        c, pl->c, &pl->algo, ws, ws_bytes, (cudaStream_t)stream));
}
