/* Row-parallel sums in a fixed tree, and the vocabulary-parallel output
 * (forward/rowpar.h). */
#include "forward/rowpar.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include <stdint.h>

#include <string.h>

static brisk_status alloc_f(brisk_rowpar *r, size_t n, float **out) {
  size_t bytes = (n ? n : 1) * sizeof(float);
  if (r->dev) {
    brisk_status st = r->dev->buffer_alloc(r->dev, bytes, (void **)out);
    if (st) return st;
  } else if (!(*out = brisk_aligned_alloc(64, bytes))) {
    return brisk_error_oom();
  }
  r->bytes += bytes;
  return BRISK_OK;
}

static void free_f(brisk_rowpar *r, float *p) {
  if (r->dev)
    r->dev->buffer_free(r->dev, p);
  else
    brisk_aligned_free(p);
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Room for `count` gather ids (device buffers only). */
static brisk_status ids_reserve(brisk_rowpar *r, size_t count) {
  if (count > INT32_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "row-parallel gather of %zu rows", count);
  if (brisk_grow((void **)&r->ids, &r->ids_cap, count ? count : 1, sizeof *r->ids))
    return brisk_error_oom();
  return BRISK_OK;
}

/* Device buffers: out [n][c1 - c0] = x[:, c0:c1] (x [n][x_cols]) by the
 * backend's row gather, x seen as rows of g floats, g dividing x_cols, c0
 * and c1 (heads or quantization blocks of columns, so g is large). */
static brisk_status gather_dev(brisk_rowpar *r, brisk_backend *be, const float *x, int64_t x_cols,
                               int64_t c0, int64_t c1, int32_t n, float *out) {
  const int64_t g = gcd64(gcd64(x_cols, c0), c1), per_row = x_cols / g, w = (c1 - c0) / g;
  const size_t count = (size_t)n * (size_t)w;
  if ((int64_t)n * per_row > INT32_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "row-parallel gather over %lld rows",
                       (long long)((int64_t)n * per_row));
  brisk_status st = ids_reserve(r, count);
  if (st) return st;
  for (int32_t t = 0; t < n; t++)
    for (int64_t j = 0; j < w; j++)
      r->ids[(size_t)t * (size_t)w + (size_t)j] = (int32_t)(t * per_row + c0 / g + j);
  return be->embed(be, BRISK_DTYPE_F32, x, (int64_t)n * per_row, g, r->ids, (int32_t)count, out);
}

/* The widest slot's input columns over every layer. */
static int64_t gather_cols(const brisk_model *m) {
  const brisk_split *sp = m->split;
  int64_t cols = 0;
  for (uint32_t l = 0; l < m->hp.n_layer; l++)
    for (int32_t j = 0; j < sp->n_slots; j++) {
      const brisk_split_layer *s = &sp->layers[l];
      int64_t a = s->att_col[j + 1] - s->att_col[j], f = s->ff_col[j + 1] - s->ff_col[j];
      if (a > cols) cols = a;
      if (f > cols) cols = f;
    }
  return cols;
}

uint64_t brisk_rowpar_bytes(const brisk_model *m, int32_t max_tokens) {
  const brisk_split *sp = m->split;
  if (!sp) return 0;
  uint64_t n = (uint64_t)max_tokens,
           floats = n * (uint64_t)gather_cols(m) + BRISK_ROWPAR_DEPTH * n * m->hp.n_embd;
  if (sp->tp_size > 1) floats += (1 + (uint64_t)sp->tp_size) * n * (uint64_t)sp->vocab_max;
  return floats * sizeof(float);
}

brisk_status brisk_rowpar_init(brisk_rowpar *r, const brisk_model *m, int32_t max_tokens,
                               brisk_backend *dev) {
  memset(r, 0, sizeof *r);
  r->dev = dev && !dev->host_memory ? dev : NULL;
  const brisk_split *sp = m->split;
  r->d = m->hp.n_embd;
  r->gather_cols = gather_cols(m);
  size_t n = (size_t)max_tokens;
  brisk_status st = alloc_f(r, n * (size_t)r->gather_cols, &r->gather);
  for (int i = 0; i < BRISK_ROWPAR_DEPTH && !st; i++)
    st = alloc_f(r, n * (size_t)r->d, &r->part[i]);
  if (!st && sp->tp_size > 1 && !(st = alloc_f(r, n * (size_t)sp->vocab_max, &r->vlocal)))
    st = alloc_f(r, (size_t)sp->tp_size * n * (size_t)sp->vocab_max, &r->vall);
  if (!st && r->dev && !(st = alloc_f(r, n * (size_t)r->d, &r->zeros))) {
    /* The zero slots' source, zeroed once. */
    float *z = brisk_calloc(n * (size_t)r->d, sizeof(float));
    if (!z) st = brisk_error_oom();
    if (!st && !(st = r->dev->upload(r->dev, r->zeros, z, n * (size_t)r->d * sizeof(float))))
      st = r->dev->synchronize(r->dev);
    brisk_free(z);
  }
  if (st) brisk_rowpar_free(r);
  return st;
}

void brisk_rowpar_free(brisk_rowpar *r) {
  free_f(r, r->gather);
  for (int i = 0; i < BRISK_ROWPAR_DEPTH; i++) free_f(r, r->part[i]);
  free_f(r, r->vlocal);
  free_f(r, r->vall);
  free_f(r, r->zeros);
  brisk_free(r->ids);
  memset(r, 0, sizeof *r);
}

float *brisk_rowpar_slot(brisk_rowpar *r) { return r->part[r->top]; }

brisk_status brisk_rowpar_push(brisk_rowpar *r, brisk_backend *be, int32_t n) {
  if (r->top >= BRISK_ROWPAR_DEPTH)
    return brisk_error(BRISK_E_INTERNAL, "row-parallel sum: more slots than the tree holds");
  r->level[r->top++] = 0;
  while (r->top >= 2 && r->level[r->top - 1] == r->level[r->top - 2]) {
    float *a = r->part[r->top - 2], *b = r->part[r->top - 1];
    brisk_status st = be->add(be, a, b, n, r->d, false, a);
    if (st) return st;
    r->level[r->top - 2]++;
    r->top--;
  }
  return BRISK_OK;
}

brisk_status brisk_rowpar_zero_slot(brisk_rowpar *r, brisk_backend *be, int32_t n) {
  if (r->top >= BRISK_ROWPAR_DEPTH)
    return brisk_error(BRISK_E_INTERNAL, "row-parallel sum: more slots than the tree holds");
  if (r->dev) return be->scale(be, r->zeros, (int64_t)n * r->d, 1.0f, r->part[r->top]);
  memset(r->part[r->top], 0, (size_t)n * (size_t)r->d * sizeof(float));
  return BRISK_OK;
}

brisk_status brisk_rowpar_push_zero(brisk_rowpar *r, brisk_backend *be, int32_t n) {
  brisk_status st = brisk_rowpar_zero_slot(r, be, n);
  return st ? st : brisk_rowpar_push(r, be, n);
}

brisk_status brisk_rowpar_matmul(brisk_rowpar *r, brisk_backend *be, const brisk_weight *w,
                                 const float *x, int64_t x_cols, int64_t c0, int64_t c1,
                                 int32_t n) {
  if (!w->data || c1 <= c0) return brisk_rowpar_push_zero(r, be, n);
  if (r->top >= BRISK_ROWPAR_DEPTH || c1 - c0 > r->gather_cols)
    return brisk_error(BRISK_E_INTERNAL, "row-parallel slot of %lld columns does not fit",
                       (long long)(c1 - c0));
  const float *in = x;
  brisk_status st;
  if ((c0 != 0 || c1 != x_cols) && r->dev) {
    if ((st = gather_dev(r, be, x, x_cols, c0, c1, n, r->gather))) return st;
    in = r->gather;
  } else if (c0 != 0 || c1 != x_cols) {
    /* The slot's columns, contiguous for the matmul. */
    size_t cols = (size_t)(c1 - c0);
    for (int32_t t = 0; t < n; t++)
      memcpy(r->gather + (size_t)t * cols, x + (size_t)t * (size_t)x_cols + (size_t)c0,
             cols * sizeof(float));
    in = r->gather;
  }
  st = be->matmul(be, w->type, w->data, w->rows, w->cols, in, n, r->part[r->top]);
  return st ? st : brisk_rowpar_push(r, be, n);
}

brisk_status brisk_rowpar_finish(brisk_rowpar *r, brisk_backend *be, int32_t n, float *x) {
  if (r->top != 1) {
    r->top = 0;
    return brisk_error(BRISK_E_INTERNAL, "row-parallel sum: slot count is not a power of two");
  }
  r->top = 0;
  brisk_status st;
  if (r->comm && brisk_comm_size(r->comm) > 1) {
    /* A device communicator reads the buffer once the backend wrote it. */
    if ((r->dev && (st = r->dev->synchronize(r->dev))) ||
        (st = brisk_comm_all_reduce_sum(r->comm, r->part[0], (int64_t)n * r->d)))
      return st;
  }
  if (r->dev) return be->scale(be, r->part[0], (int64_t)n * r->d, 1.0f, x); /* exact copy */
  memcpy(x, r->part[0], (size_t)n * (size_t)r->d * sizeof(float));
  return BRISK_OK;
}

/* Device buffers: the gathered ranks' rows (vall) into logits [n][n_vocab]
 * by one row gather, rows of the widest width dividing every rank's first
 * row. */
static brisk_status output_dev(brisk_rowpar *r, brisk_backend *be, const brisk_split *sp,
                               int64_t nv, int32_t n, float *logits) {
  int64_t g = nv;
  for (int32_t q = 1; q < sp->tp_size; q++) g = gcd64(g, sp->vocab_begin[q]);
  const int64_t chunk = (int64_t)n * sp->vocab_max, rows = (int64_t)sp->tp_size * chunk / g;
  const size_t count = (size_t)n * (size_t)(nv / g);
  if (rows > INT32_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "vocabulary gather over %lld rows",
                       (long long)rows);
  brisk_status st = ids_reserve(r, count);
  if (st) return st;
  size_t k = 0;
  for (int32_t t = 0; t < n; t++)
    for (int32_t q = 0; q < sp->tp_size; q++) {
      const int64_t nq = sp->vocab_begin[q + 1] - sp->vocab_begin[q],
                    base = ((int64_t)q * chunk + (int64_t)t * nq) / g;
      for (int64_t j = 0; j < nq / g; j++) r->ids[k++] = (int32_t)(base + j);
    }
  return be->embed(be, BRISK_DTYPE_F32, r->vall, rows, g, r->ids, (int32_t)count, logits);
}

brisk_status brisk_rowpar_output(brisk_rowpar *r, brisk_backend *be, const brisk_model *m,
                                 const float *h, int32_t n, float *logits) {
  const brisk_split *sp = m->split;
  const brisk_weight *w = &m->output;
  size_t vmax = (size_t)sp->vocab_max, nv = m->hp.n_vocab, chunk = (size_t)n * vmax;
  brisk_status st = be->matmul(be, w->type, w->data, w->rows, w->cols, h, n, r->vlocal);
  if (!st && r->dev) st = r->dev->synchronize(r->dev);
  if (st || (st = brisk_comm_all_gather(r->comm, r->vlocal, chunk * sizeof(float), r->vall)))
    return st;
  if (r->dev) return output_dev(r, be, sp, (int64_t)nv, n, logits);
  /* Rank q's rows are [n][its count], contiguous, at vall + q * chunk. */
  for (int32_t q = 0; q < sp->tp_size; q++) {
    size_t v0 = (size_t)sp->vocab_begin[q], nq = (size_t)sp->vocab_begin[q + 1] - v0;
    for (int32_t t = 0; t < n; t++)
      memcpy(logits + (size_t)t * nv + v0, r->vall + (size_t)q * chunk + (size_t)t * nq,
             nq * sizeof(float));
  }
  return BRISK_OK;
}
