/* llama.cpp's importance-matrix files (see imatrix_file.h), read from
 * untrusted bytes with every size checked, and written in the GGUF form. */
#include "imatrix_file.h"

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/gguf.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 1024

void imatrix_free(imatrix *m) {
  for (size_t i = 0; i < m->n; i++) {
    free(m->e[i].name);
    free(m->e[i].sum2);
    free(m->e[i].counts);
  }
  free(m->e);
  free(m->dataset);
  memset(m, 0, sizeof *m);
}

imatrix_entry *imatrix_find(const imatrix *m, const char *name) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->e[i].name, name)) return &m->e[i];
  return NULL;
}

static brisk_status add_entry(imatrix *m, const char *name, size_t name_len, int64_t n_cols,
                              int64_t n_mat, imatrix_entry **out) {
  size_t cells;
  if (n_cols < 1 || n_mat < 1 || brisk_mul_overflow_size((size_t)n_cols, (size_t)n_mat, &cells) ||
      cells > (SIZE_MAX >> 4))
    return brisk_error(BRISK_E_FORMAT, "imatrix: %.*s has %lld x %lld values", (int)name_len, name,
                       (long long)n_cols, (long long)n_mat);
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    imatrix_entry *e = realloc(m->e, cap * sizeof *e);
    if (!e) return brisk_error(BRISK_E_OUT_OF_MEMORY, "imatrix: out of memory");
    m->e = e;
    m->cap = cap;
  }
  imatrix_entry *e = &m->e[m->n];
  memset(e, 0, sizeof *e);
  e->name = malloc(name_len + 1);
  e->sum2 = calloc(cells, sizeof *e->sum2);
  e->counts = calloc((size_t)n_mat, sizeof *e->counts);
  if (!e->name || !e->sum2 || !e->counts) {
    free(e->name);
    free(e->sum2);
    free(e->counts);
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "imatrix: out of memory");
  }
  memcpy(e->name, name, name_len);
  e->name[name_len] = 0;
  e->n_cols = n_cols;
  e->n_mat = n_mat;
  m->n++;
  *out = e;
  return BRISK_OK;
}

brisk_status imatrix_add(imatrix *m, const char *name, int64_t n_cols, imatrix_entry **out) {
  return add_entry(m, name, strlen(name), n_cols, 1, out);
}

void imatrix_importance(const imatrix_entry *e, int64_t mat, float *out) {
  const double c = e->counts[mat];
  const double *s = e->sum2 + (size_t)mat * (size_t)e->n_cols;
  /* A huge sum over a tiny count stays the largest float, not infinity. */
  for (int64_t i = 0; i < e->n_cols; i++) {
    double v = c > 0 ? s[i] / c : 1.0;
    out[i] = v < FLT_MAX ? (float)v : FLT_MAX;
  }
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const imatrix_entry *)a)->name, ((const imatrix_entry *)b)->name);
}

brisk_status imatrix_write(const imatrix *m, const char *path) {
  brisk_gguf_writer *w = NULL;
  brisk_status st = brisk_gguf_writer_create(3, 32, &w);
  const char *ds = m->dataset ? m->dataset : "";
  imatrix_entry *sorted = malloc((m->n ? m->n : 1) * sizeof *sorted);
  float *buf = NULL;
  if (!st && !sorted) st = brisk_error(BRISK_E_OUT_OF_MEMORY, "imatrix: out of memory");
  if (!st) st = brisk_gguf_writer_set_str(w, "general.type", "imatrix");
  if (!st) st = brisk_gguf_writer_set_arr_str(w, "imatrix.datasets", &ds, 1);
  if (!st) st = brisk_gguf_writer_set_u32(w, "imatrix.chunk_count", m->chunk_count);
  if (!st) st = brisk_gguf_writer_set_u32(w, "imatrix.chunk_size", m->chunk_size);
  if (!st) {
    /* llama.cpp writes the entries in name order. */
    memcpy(sorted, m->e, m->n * sizeof *sorted);
    qsort(sorted, m->n, sizeof *sorted, by_name);
  }
  for (size_t i = 0; i < m->n && !st; i++) {
    const imatrix_entry *e = &sorted[i];
    const size_t cells = (size_t)e->n_cols * (size_t)e->n_mat;
    char name[MAX_NAME + 16];
    if (!(buf = malloc(cells * sizeof *buf))) {
      st = brisk_error(BRISK_E_OUT_OF_MEMORY, "imatrix: out of memory");
      break;
    }
    for (size_t j = 0; j < cells; j++) buf[j] = (float)e->sum2[j];
    const uint64_t ne[2] = {(uint64_t)e->n_cols, (uint64_t)e->n_mat}, ne_c[2] = {1, ne[1]};
    snprintf(name, sizeof name, "%s.in_sum2", e->name);
    st = brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, 2, ne, buf, cells * 4);
    for (size_t j = 0; j < (size_t)e->n_mat && !st; j++) buf[j] = (float)e->counts[j];
    snprintf(name, sizeof name, "%s.counts", e->name);
    if (!st)
      st = brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, 2, ne_c, buf,
                                        (uint64_t)e->n_mat * 4);
    free(buf);
    buf = NULL;
  }
  if (!st) st = brisk_gguf_writer_write_file(w, path);
  brisk_gguf_writer_free(w);
  free(sorted);
  return st;
}

static bool ends_with(const char *s, size_t n, const char *suffix, size_t *stem) {
  size_t m = strlen(suffix);
  if (n < m || memcmp(s + n - m, suffix, m)) return false;
  *stem = n - m;
  return true;
}

static bool finite_nonneg(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x;
    memcpy(&x, v + i, sizeof x); /* tensor data may be unaligned in memory */
    if (!(x >= 0) || !isfinite(x)) return false;
  }
  return true;
}

static brisk_status read_gguf(const void *data, size_t size, imatrix *m) {
  brisk_gguf *g = NULL;
  brisk_status st = brisk_gguf_open_memory(data, size, &g);
  if (st) return st;
  brisk_gguf_str s;
  if (brisk_gguf_get_str(g, "general.type", &s) || s.len != 7 || memcmp(s.ptr, "imatrix", 7)) {
    st = brisk_error(BRISK_E_FORMAT, "imatrix: a GGUF file whose general.type is not \"imatrix\"");
    goto done;
  }
  uint32_t v;
  if (!brisk_gguf_get_u32(g, "imatrix.chunk_count", &v)) m->chunk_count = v;
  if (!brisk_gguf_get_u32(g, "imatrix.chunk_size", &v)) m->chunk_size = v;
  for (int64_t i = 0; i < brisk_gguf_n_tensors(g) && !st; i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    size_t n = strlen(t->name), stem;
    if (!ends_with(t->name, n, ".in_sum2", &stem)) continue;
    if (stem == 0 || stem > MAX_NAME) {
      st = brisk_error(BRISK_E_FORMAT, "imatrix: tensor name '%s' has no usable stem", t->name);
      break;
    }
    char cname[MAX_NAME + 16];
    snprintf(cname, sizeof cname, "%.*s.counts", (int)stem, t->name);
    const brisk_gguf_tensor *c = brisk_gguf_find_tensor(g, cname);
    if (t->type != BRISK_DTYPE_F32 || t->n_dims > 2 || !c || c->type != BRISK_DTYPE_F32 ||
        c->ne[0] != 1 || c->n_dims > 2 || c->ne[1] != t->ne[1] || t->ne[0] > INT64_MAX ||
        t->ne[1] > INT64_MAX) {
      st =
          brisk_error(BRISK_E_FORMAT, "imatrix: %s needs an F32 [n, m] tensor and an F32 [1, m] %s",
                      t->name, cname);
      break;
    }
    const size_t cells = (size_t)(t->n_bytes / 4);
    if (!finite_nonneg(t->data, cells) || !finite_nonneg(c->data, (size_t)c->ne[1])) {
      st = brisk_error(BRISK_E_FORMAT, "imatrix: %s has negative or non-finite values", t->name);
      break;
    }
    imatrix_entry *e;
    if ((st = add_entry(m, t->name, stem, (int64_t)t->ne[0], (int64_t)t->ne[1], &e))) break;
    const float *sv = t->data, *cv = c->data;
    for (size_t j = 0; j < cells; j++) {
      float x;
      memcpy(&x, sv + j, 4);
      e->sum2[j] = x;
    }
    for (size_t j = 0; j < (size_t)e->n_mat; j++) {
      float x;
      memcpy(&x, cv + j, 4);
      e->counts[j] = x;
    }
  }
  int64_t k = brisk_gguf_find_key(g, "imatrix.datasets");
  if (!st && k >= 0 && brisk_gguf_kv_type(g, k) == BRISK_GGUF_ARRAY &&
      brisk_gguf_kv_arr_type(g, k) == BRISK_GGUF_STRING && brisk_gguf_kv_arr_len(g, k) > 0) {
    brisk_gguf_str d = brisk_gguf_arr_str(g, k, 0);
    if ((m->dataset = malloc(d.len + 1))) {
      memcpy(m->dataset, d.ptr, d.len);
      m->dataset[d.len] = 0;
    }
  }
done:
  brisk_gguf_close(g);
  return st;
}

/* A cursor over the legacy form's bytes. */
typedef struct cur {
  const unsigned char *p;
  size_t left;
} cur;

static bool take(cur *c, void *out, size_t n) {
  if (c->left < n) return false;
  memcpy(out, c->p, n);
  c->p += n;
  c->left -= n;
  return true;
}

static brisk_status read_legacy(const void *data, size_t size, imatrix *m) {
  cur c = {data, size};
  int32_t n_entries;
  if (!take(&c, &n_entries, 4) || n_entries < 0)
    return brisk_error(BRISK_E_FORMAT, "imatrix: not an imatrix file (bad entry count)");
  for (int32_t i = 0; i < n_entries; i++) {
    int32_t len = 0, ncall = 0, nval = 0;
    if (!take(&c, &len, 4) || len < 1 || len > MAX_NAME || c.left < (size_t)len)
      return brisk_error(BRISK_E_FORMAT, "imatrix: entry %d has a bad name length", i);
    const char *name = (const char *)c.p;
    c.p += len;
    c.left -= (size_t)len;
    if (memchr(name, 0, (size_t)len))
      return brisk_error(BRISK_E_FORMAT, "imatrix: entry %d's name holds a NUL byte", i);
    if (!take(&c, &ncall, 4) || !take(&c, &nval, 4) || nval < 1 || ncall < 0 ||
        c.left / 4 < (size_t)nval)
      return brisk_error(BRISK_E_FORMAT, "imatrix: entry %d (%.*s) is truncated or has %d values",
                         i, (int)len, name, nval);
    if (!finite_nonneg((const float *)c.p, (size_t)nval))
      return brisk_error(BRISK_E_FORMAT, "imatrix: %.*s has negative or non-finite values",
                         (int)len, name);
    imatrix_entry *e;
    brisk_status st = add_entry(m, name, (size_t)len, nval, 1, &e);
    if (st) return st;
    /* Stored as mean * ncall: kept as sums over ncall "rows". */
    for (int32_t j = 0; j < nval; j++) {
      float x;
      take(&c, &x, 4);
      e->sum2[j] = x;
    }
    e->counts[0] = ncall > 0 ? ncall : 1;
  }
  int32_t chunks, len;
  if (take(&c, &chunks, 4) && chunks >= 0) m->chunk_count = (uint32_t)chunks;
  if (take(&c, &len, 4) && len > 0 && (size_t)len <= c.left &&
      (m->dataset = malloc((size_t)len + 1))) {
    memcpy(m->dataset, c.p, (size_t)len);
    m->dataset[len] = 0;
  }
  return BRISK_OK;
}

brisk_status imatrix_read_memory(const void *data, size_t size, imatrix *out) {
  memset(out, 0, sizeof *out);
  brisk_status st = size >= 4 && !memcmp(data, "GGUF", 4) ? read_gguf(data, size, out)
                                                          : read_legacy(data, size, out);
  if (st) imatrix_free(out);
  return st;
}

brisk_status imatrix_read(const char *path, imatrix *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return brisk_error(BRISK_E_IO, "cannot open '%s'", path);
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) return brisk_error(BRISK_E_OUT_OF_MEMORY, "reading '%s': out of memory", path);
  brisk_status st = imatrix_read_memory(buf, n, out);
  free(buf);
  return st;
}
