/* Selection over rows: argmax, top-k, and MoE routing (softmax, top-k,
 * renormalize). One total order everywhere: larger value first, equal values
 * by lower index, NaN after every number. */
#include "backend/cpu/ops/ops.h"

#include "core/error.h"

#include <math.h>

/* True when element i ranks before element j. */
static bool ranks_before(const float *x, int32_t i, int32_t j) {
  float a = x[i], b = x[j];
  bool an = isnan(a), bn = isnan(b);
  if (an || bn) return an && bn ? i < j : bn;
  if (a != b) return a > b;
  return i < j;
}

/* heap[0..n) is a heap whose root ranks last; restores it below `at`. */
static void sift_down(const float *x, int32_t *heap, int32_t n, int32_t at) {
  for (;;) {
    int32_t worst = at, l = 2 * at + 1, r = l + 1;
    if (l < n && ranks_before(x, heap[worst], heap[l])) worst = l;
    if (r < n && ranks_before(x, heap[worst], heap[r])) worst = r;
    if (worst == at) return;
    int32_t tmp = heap[at];
    heap[at] = heap[worst];
    heap[worst] = tmp;
    at = worst;
  }
}

/* ids[0..k) = the k first-ranked indices of x[0..n), in rank order. The
 * output doubles as a size-k heap: O(n log k), no allocation. */
static void select_top_k(const float *x /* [n] */, int32_t n, int32_t k, int32_t *ids /* [k] */) {
  for (int32_t i = 0; i < k; i++) ids[i] = i;
  for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(x, ids, k, i);
  for (int32_t i = k; i < n; i++) {
    if (ranks_before(x, i, ids[0])) {
      ids[0] = i;
      sift_down(x, ids, k, 0);
    }
  }
  /* Heap sort: the last-ranked goes to the end each round. */
  for (int32_t end = k - 1; end > 0; end--) {
    int32_t tmp = ids[0];
    ids[0] = ids[end];
    ids[end] = tmp;
    sift_down(x, ids, end, 0);
  }
}

static int32_t row_argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (ranks_before(x, i, best)) best = i;
  return best;
}

typedef struct select_job {
  const float *x; // [n_rows][n_cols]
  int32_t *ids;   // [n_rows][k]
  float *vals;    // [n_rows][k] or NULL
  int32_t n_cols, k;
} select_job;

static void argmax_rows(void *p, int64_t r0, int64_t r1) {
  const select_job *j = p;
  for (int64_t r = r0; r < r1; r++) j->ids[r] = row_argmax(j->x + r * j->n_cols, j->n_cols);
}

brisk_status brisk_cpu_ops_argmax(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                  int32_t *ids) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_select("argmax", x, n_rows, n_cols, 1, ids, false, NULL);
  if (st != BRISK_OK) return st;
  select_job job = {x, ids, NULL, (int32_t)n_cols, 1};
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, (double)n_rows * (double)n_cols, argmax_rows, &job);
  return BRISK_OK;
}

static void top_k_rows(void *p, int64_t r0, int64_t r1) {
  const select_job *j = p;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * j->n_cols;
    int32_t *ids = j->ids + r * j->k;
    select_top_k(x, j->n_cols, j->k, ids);
    if (j->vals)
      for (int32_t i = 0; i < j->k; i++) j->vals[r * j->k + i] = x[ids[i]];
  }
}

brisk_status brisk_cpu_ops_top_k(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                 int32_t k, int32_t *ids, float *vals) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_select("top_k", x, n_rows, n_cols, k, ids, false, NULL);
  if (st != BRISK_OK) return st;
  select_job job = {x, ids, vals, (int32_t)n_cols, k};
  double work = (double)n_rows * ((double)n_cols + (double)k * log2((double)k + 1) * 4);
  brisk_cpu_ops_parallel(c->pool, n_rows, 1, work, top_k_rows, &job);
  return BRISK_OK;
}

typedef struct route_job {
  const float *logits; // [n_tokens][n_experts]
  int32_t *ids;        // [n_tokens][k]
  float *weights;      // [n_tokens][k]
  int32_t n_experts, k;
  bool renormalize;
} route_job;

/* Softmax in float64: expert counts are small, and the chosen weights then
 * carry one rounding each. Selection ranks the logits themselves (softmax is
 * monotonic), so ties are exact ties of the inputs. */
static void route_rows(void *p, int64_t t0, int64_t t1) {
  const route_job *j = p;
  for (int64_t t = t0; t < t1; t++) {
    const float *x = j->logits + t * j->n_experts;
    int32_t *ids = j->ids + t * j->k;
    float *w = j->weights + t * j->k;
    select_top_k(x, j->n_experts, j->k, ids);
    double m = x[ids[0]], total = 0, chosen = 0;
    for (int32_t e = 0; e < j->n_experts; e++) total += exp((double)x[e] - m);
    for (int32_t i = 0; i < j->k; i++) chosen += exp((double)x[ids[i]] - m);
    double denom = j->renormalize ? chosen : total;
    for (int32_t i = 0; i < j->k; i++) w[i] = (float)(exp((double)x[ids[i]] - m) / denom);
  }
}

brisk_status brisk_cpu_ops_moe_route(brisk_backend *be, const float *logits, int32_t n_tokens,
                                     int32_t n_experts, int32_t k, bool renormalize, int32_t *ids,
                                     float *weights) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st =
      brisk_check_select("moe_route", logits, n_tokens, n_experts, k, ids, true, weights);
  if (st != BRISK_OK) return st;
  route_job job = {logits, ids, weights, n_experts, k, renormalize};
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, 30.0 * n_tokens * (double)n_experts, route_rows,
                         &job);
  return BRISK_OK;
}

typedef struct route_group_job {
  route_job base;
  int32_t n_group, topk_group;
} route_group_job;

/* Groups ranked by their largest logit (softmax is monotonic, so the same
 * order as by their largest probability); the allowed experts gathered in
 * id order, so that ranking the gathered logits breaks ties by id. */
static void route_group_rows(void *p, int64_t t0, int64_t t1) {
  const route_group_job *g = p;
  const route_job *j = &g->base;
  const int32_t per = j->n_experts / g->n_group;
  float gmax[BRISK_MAX_EXPERTS], vals[BRISK_MAX_EXPERTS];
  int32_t gids[BRISK_MAX_EXPERTS], map[BRISK_MAX_EXPERTS];
  bool keep[BRISK_MAX_EXPERTS];
  for (int64_t t = t0; t < t1; t++) {
    const float *x = j->logits + t * j->n_experts;
    int32_t *ids = j->ids + t * j->k;
    float *w = j->weights + t * j->k;
    for (int32_t gi = 0; gi < g->n_group; gi++) {
      gmax[gi] = x[gi * per + row_argmax(x + gi * per, per)];
      keep[gi] = false;
    }
    select_top_k(gmax, g->n_group, g->topk_group, gids);
    for (int32_t i = 0; i < g->topk_group; i++) keep[gids[i]] = true;
    int32_t n = 0;
    for (int32_t e = 0; e < j->n_experts; e++)
      if (keep[e / per]) {
        vals[n] = x[e];
        map[n++] = e;
      }
    select_top_k(vals, n, j->k, ids);
    for (int32_t i = 0; i < j->k; i++) ids[i] = map[ids[i]];
    double m = x[row_argmax(x, j->n_experts)], total = 0, chosen = 0;
    for (int32_t e = 0; e < j->n_experts; e++) total += exp((double)x[e] - m);
    for (int32_t i = 0; i < j->k; i++) chosen += exp((double)x[ids[i]] - m);
    double denom = j->renormalize ? chosen : total;
    for (int32_t i = 0; i < j->k; i++) w[i] = (float)(exp((double)x[ids[i]] - m) / denom);
  }
}

brisk_status brisk_cpu_ops_moe_route_group(brisk_backend *be, const float *logits, int32_t n_tokens,
                                           int32_t n_experts, int32_t k, int32_t n_group,
                                           int32_t topk_group, bool renormalize, int32_t *ids,
                                           float *weights) {
  const brisk_cpu_ctx *c = be->ctx;
  brisk_status st = brisk_check_moe_route_group(logits, n_tokens, n_experts, k, n_group, topk_group,
                                                ids, weights);
  if (st != BRISK_OK) return st;
  route_group_job job = {{logits, ids, weights, n_experts, k, renormalize}, n_group, topk_group};
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, 40.0 * n_tokens * (double)n_experts,
                         route_group_rows, &job);
  return BRISK_OK;
}
