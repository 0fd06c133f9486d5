/* The CPU backend's table: host buffers, the matmul entry (kernels in
 * backend/cpu/matmul), and the operations in this folder. */
#include "backend/cpu/ops/cpu_backend.h"

#include "backend/cpu/matmul/matmul.h"
#include "backend/cpu/matmul/pack.h"
#include "backend/cpu/ops/ops.h"
#include "backend/cpu/ops/vec.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

/* Buffers are cache-line aligned (and so AVX2-load friendly). */
#define BUFFER_ALIGN 64

typedef struct cpu_backend {
  brisk_backend base; /* first: the table the caller holds */
  brisk_cpu_ctx ctx;
} cpu_backend;

static void cpu_destroy(brisk_backend *be) {
  cpu_backend *cb = (cpu_backend *)be;
  brisk_aligned_free(cb->ctx.workspace);
  brisk_free(cb);
}

static brisk_status cpu_buffer_alloc(brisk_backend *be, size_t bytes, void **out) {
  (void)be;
  if (!out || bytes == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "buffer_alloc: out is NULL or size is 0");
  void *p = brisk_aligned_alloc(BUFFER_ALIGN, bytes);
  if (!p) return brisk_error_oom_bytes("buffer_alloc", bytes);
  *out = p;
  return BRISK_OK;
}

static void cpu_buffer_free(brisk_backend *be, void *buf) {
  (void)be;
  brisk_aligned_free(buf);
}

static brisk_status cpu_copy(const char *what, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return BRISK_OK;
  if (!dst || !src) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: NULL pointer", what);
  memmove(dst, src, bytes);
  return BRISK_OK;
}

static brisk_status cpu_upload(brisk_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  return cpu_copy("upload", dst, src, bytes);
}

static brisk_status cpu_download(brisk_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  return cpu_copy("download", dst, src, bytes);
}

/* Every operation has returned by the time it reports: nothing is queued. */
static brisk_status cpu_synchronize(brisk_backend *be) {
  (void)be;
  return BRISK_OK;
}

/* The workspace (x quantized on the fly) is kept and grown to the largest
 * product seen, so that steady-state decode steps allocate nothing. */
static brisk_status cpu_matmul(brisk_backend *be, uint32_t w_type, const void *w, int64_t n,
                               int64_t k, const float *x, int64_t m, float *y) {
  brisk_cpu_ctx *c = be->ctx;
  int n_tasks = brisk_parallel_concurrency(c->pool);
  size_t need = brisk_cpu_matmul_workspace_size(w_type, k, m, n_tasks);
  /* SIZE_MAX flags arguments the matmul rejects: let it say why. */
  if (need == SIZE_MAX)
    return brisk_cpu_matmul_at(c->pool, (brisk_isa_level)c->mm_isa, w_type, w, n, k, x, m, y, NULL,
                               0);
  if (need > c->workspace_size) {
    void *ws = brisk_aligned_alloc(BUFFER_ALIGN, need);
    if (!ws) return brisk_error_oom_bytes("matmul workspace", need);
    brisk_aligned_free(c->workspace);
    c->workspace = ws;
    c->workspace_size = need;
  }
  /* The backend's ISA choice covers the matmul too (SCALAR means scalar everywhere). */
  return brisk_cpu_matmul_at(c->pool, (brisk_isa_level)c->mm_isa, w_type, w, n, k, x, m, y,
                             c->workspace, c->workspace_size);
}

size_t brisk_backend_cpu_workspace_bytes(const brisk_backend *be) {
  return be ? ((const brisk_cpu_ctx *)be->ctx)->workspace_size : 0;
}

/* Matrices of a type the kernels read faster regrouped (the packed _R8
 * layouts of backend/cpu/matmul/pack.h, where the AVX2 kernels run) are
 * rewritten in place; the kernels give the same bits for either layout, so
 * a caller that cannot afford the rewrite uses them as stored. Everything
 * else is used as stored. */
static brisk_status cpu_weight_plan(brisk_backend *be, uint32_t type, int64_t rows, int64_t cols,
                                    bool matrix, brisk_weight_plan *plan) {
  (void)be;
  if (!plan || rows < 1 || cols < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "weight_plan: plan is NULL or shape %lld x %lld",
                       (long long)rows, (long long)cols);
  *plan = (brisk_weight_plan){BRISK_WEIGHT_AS_STORED, type, 0};
  if (!matrix) return BRISK_OK;
  const uint32_t packed = brisk_cpu_pack_type(type, rows);
  if (packed != type) *plan = (brisk_weight_plan){BRISK_WEIGHT_IN_PLACE, packed, 0};
  return BRISK_OK;
}

static brisk_status cpu_weight_prepare(brisk_backend *be, const brisk_weight_plan *plan,
                                       uint32_t type, int64_t rows, int64_t cols, void *src,
                                       void **out) {
  (void)be;
  if (!plan || !src || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "weight_prepare: NULL argument");
  switch (plan->mode) {
  case BRISK_WEIGHT_AS_STORED: *out = src; return BRISK_OK;
  case BRISK_WEIGHT_IN_PLACE: {
    if (brisk_cpu_pack_type(type, rows) != plan->type)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "weight_prepare: the plan's type %u is not this backend's for type %u",
                         plan->type, type);
    brisk_status st = brisk_cpu_pack(plan->type, src, rows, cols);
    if (!st) *out = src;
    return st;
  }
  default:
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "weight_prepare: mode %d is not the CPU's",
                       (int)plan->mode);
  }
}

brisk_status brisk_backend_cpu_create(brisk_threadpool *pool, brisk_cpu_isa isa,
                                      brisk_backend **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "cpu backend: out is NULL");
  brisk_isa_level have = brisk_cpu_isa_detected();
#if !defined(BRISK_HAVE_AVX2_KERNELS) && !defined(BRISK_HAVE_NEON_KERNELS)
  have = BRISK_ISA_SCALAR;
#endif
  brisk_isa_level level;
  switch (isa) {
  case BRISK_CPU_ISA_AUTO:
    level = brisk_cpu_isa_level();
    if (level > have) level = have;
    break;
  case BRISK_CPU_ISA_SCALAR: level = BRISK_ISA_SCALAR; break;
  case BRISK_CPU_ISA_AVX2:
  case BRISK_CPU_ISA_AVXVNNI:
  case BRISK_CPU_ISA_AVX512:
    level = isa == BRISK_CPU_ISA_AVX2      ? BRISK_ISA_AVX2
            : isa == BRISK_CPU_ISA_AVXVNNI ? BRISK_ISA_AVXVNNI
                                           : BRISK_ISA_AVX512;
    if (have < level || brisk_isa_is_neon(have))
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "cpu backend: %s kernels asked for, but this build or processor lacks "
                         "%s",
                         brisk_isa_name(level),
                         level == BRISK_ISA_AVX512 ? "AVX-512 F/BW/VL/VNNI (or the OS's ZMM state)"
                         : level == BRISK_ISA_AVXVNNI ? "AVX-VNNI (and AVX-512 VNNI)"
                                                      : "AVX2, FMA or F16C");
    break;
  default: return brisk_error(BRISK_E_INVALID_ARGUMENT, "cpu backend: unknown isa %d", (int)isa);
  }
  const bool neon = brisk_isa_is_neon(level);
  const bool avx2 = !neon && level >= BRISK_ISA_AVX2;
  cpu_backend *cb = brisk_calloc(1, sizeof *cb);
  if (!cb) return brisk_error_oom();
  cb->ctx.pool = pool;
  cb->ctx.avx2 = avx2;
  cb->ctx.neon = neon;
  cb->ctx.avx512 = avx2 && level >= BRISK_ISA_AVX512;
  /* The level may be forced on an AVX-512 CPU that lacks the VEX form. */
  cb->ctx.avxvnni = avx2 && level == BRISK_ISA_AVXVNNI && brisk_cpu()->avxvnni;
  cb->ctx.mm_isa = (int)level;
  cb->base = (brisk_backend){
      .name = level == BRISK_ISA_AVX512         ? "cpu-avx512"
              : level == BRISK_ISA_AVXVNNI      ? "cpu-avxvnni"
              : avx2                            ? "cpu-avx2"
              : level == BRISK_ISA_NEON_I8MM    ? "cpu-i8mm"
              : level == BRISK_ISA_NEON_DOTPROD ? "cpu-dotprod"
              : neon                            ? "cpu-neon"
                                                : "cpu-scalar",
      .ctx = &cb->ctx,
      .destroy = cpu_destroy,
      .buffer_alloc = cpu_buffer_alloc,
      .buffer_free = cpu_buffer_free,
      .upload = cpu_upload,
      .download = cpu_download,
      .host_memory = true,
      .synchronize = cpu_synchronize,
      .workspace_bytes = brisk_backend_cpu_workspace_bytes,
      .weight_plan = cpu_weight_plan,
      .weight_prepare = cpu_weight_prepare,
      .matmul = cpu_matmul,
      .embed = brisk_cpu_ops_embed,
      .gather_cols = brisk_cpu_ops_gather_cols,
      .rmsnorm = brisk_cpu_ops_rmsnorm,
      .rope = brisk_cpu_ops_rope,
      .glu = brisk_cpu_ops_glu,
      .add = brisk_cpu_ops_add,
      .scale = brisk_cpu_ops_scale,
      .softmax = brisk_cpu_ops_softmax,
      .softcap = brisk_cpu_ops_softcap,
      .sigmoid_gate = brisk_cpu_ops_sigmoid_gate,
      .layernorm = brisk_cpu_ops_layernorm,
      .gelu = brisk_cpu_ops_gelu,
      .kv_write = brisk_cpu_ops_kv_write,
      .kv_copy_blocks = brisk_cpu_ops_kv_copy_blocks,
      .attention = brisk_cpu_ops_attention,
      .moe_route = brisk_cpu_ops_moe_route,
      .moe_route_group = brisk_cpu_ops_moe_route_group,
      .mla_kv_write = brisk_cpu_ops_mla_kv_write,
      .mla_attention = brisk_cpu_ops_mla_attention,
      .argmax = brisk_cpu_ops_argmax,
      .top_k = brisk_cpu_ops_top_k,
  };
  *out = &cb->base;
  return BRISK_OK;
}
