/* safetensors writer: a header in insertion order, data widest type first. */
#include "core/utf8.h"
#include "format/safetensors.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wtensor {
  char *name;
  uint32_t dtype, elem_size, n_dims;
  uint64_t shape[BRISK_SAFETENSORS_MAX_DIMS];
  const void *data; /* [n_bytes] */
  void *owned;      /* the copy behind data, if the writer made one */
  uint64_t n_bytes;
  uint64_t offset; /* assigned when writing */
} wtensor;

struct brisk_safetensors_writer {
  wtensor *tensors; /* [n] in insertion order */
  size_t n, cap;
  char **meta;             /* [2 * n_meta] key, value, ... */
  size_t n_meta, cap_meta; /* cap_meta counts key-value pairs */
};

brisk_status brisk_safetensors_writer_create(brisk_safetensors_writer **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors writer: NULL out");
  brisk_safetensors_writer *w = brisk_calloc(1, sizeof *w);
  if (!w) return brisk_error_oom();
  *out = w;
  return BRISK_OK;
}

void brisk_safetensors_writer_free(brisk_safetensors_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) {
    brisk_free(w->tensors[i].name);
    brisk_free(w->tensors[i].owned);
  }
  for (size_t i = 0; i < 2 * w->n_meta; i++) brisk_free(w->meta[i]);
  brisk_free(w->tensors);
  brisk_free(w->meta);
  brisk_free(w);
}

static bool utf8_str(const char *s) { return s && brisk_utf8_valid(s, strlen(s)); }

brisk_status brisk_safetensors_writer_set_metadata(brisk_safetensors_writer *w, const char *key,
                                                   const char *value) {
  if (!w || !utf8_str(key) || !utf8_str(value))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "safetensors writer: metadata key and value must be UTF-8 strings");
  char *v = brisk_strdup(value);
  if (!v) return brisk_error_oom();
  for (size_t i = 0; i < w->n_meta; i++) {
    if (strcmp(w->meta[2 * i], key) == 0) {
      brisk_free(w->meta[2 * i + 1]);
      w->meta[2 * i + 1] = v;
      return BRISK_OK;
    }
  }
  char *k = brisk_strdup(key);
  if (!k || brisk_grow((void **)&w->meta, &w->cap_meta, w->n_meta + 1, 2 * sizeof(char *)) != 0) {
    brisk_free(k);
    brisk_free(v);
    return brisk_error_oom();
  }
  w->meta[2 * w->n_meta] = k;
  w->meta[2 * w->n_meta + 1] = v;
  w->n_meta++;
  return BRISK_OK;
}

static brisk_status add_tensor(brisk_safetensors_writer *w, const char *name, uint32_t dtype,
                               uint32_t n_dims, const uint64_t *shape, const void *data,
                               uint64_t n_bytes, bool copy) {
  if (!w || !utf8_str(name) || !*name || strcmp(name, "__metadata__") == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "safetensors writer: tensor name must be a non-empty UTF-8 string other "
                       "than \"__metadata__\"");
  const char *dname = brisk_safetensors_dtype_name(dtype);
  if (!dname)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "safetensors writer: tensor '%.200s': dtype %u is not F32, F16, BF16 or I32",
                       name, dtype);
  if (n_dims > BRISK_SAFETENSORS_MAX_DIMS || (n_dims && !shape))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "safetensors writer: tensor '%.200s': bad shape (%u dimensions)", name,
                       n_dims);
  uint64_t elem = dtype == BRISK_DTYPE_F32 || dtype == BRISK_DTYPE_I32 ? 4 : 2, need = elem;
  for (uint32_t i = 0; i < n_dims; i++) {
    if (brisk_mul_overflow_u64(need, shape[i], &need))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "safetensors writer: tensor '%.200s': size overflows", name);
  }
  if (need != n_bytes || (n_bytes && !data) || n_bytes > SIZE_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "safetensors writer: tensor '%.200s': %llu bytes given, shape needs %llu",
                       name, (unsigned long long)n_bytes, (unsigned long long)need);
  if (brisk_grow((void **)&w->tensors, &w->cap, w->n + 1, sizeof(wtensor)) != 0)
    return brisk_error_oom();
  wtensor t = {0};
  t.name = brisk_strdup(name);
  if (!t.name) return brisk_error_oom();
  if (copy && n_bytes) {
    t.owned = brisk_malloc((size_t)n_bytes);
    if (!t.owned) {
      brisk_free(t.name);
      return brisk_error_oom();
    }
    memcpy(t.owned, data, (size_t)n_bytes);
  }
  t.dtype = dtype;
  t.elem_size = (uint32_t)elem;
  t.n_dims = n_dims;
  for (uint32_t i = 0; i < n_dims; i++) t.shape[i] = shape[i];
  t.data = t.owned ? t.owned : data;
  t.n_bytes = n_bytes;
  w->tensors[w->n++] = t;
  return BRISK_OK;
}

brisk_status brisk_safetensors_writer_add_tensor(brisk_safetensors_writer *w, const char *name,
                                                 uint32_t dtype, uint32_t n_dims,
                                                 const uint64_t *shape, const void *data,
                                                 uint64_t n_bytes) {
  return add_tensor(w, name, dtype, n_dims, shape, data, n_bytes, true);
}

brisk_status brisk_safetensors_writer_add_tensor_ref(brisk_safetensors_writer *w, const char *name,
                                                     uint32_t dtype, uint32_t n_dims,
                                                     const uint64_t *shape, const void *data,
                                                     uint64_t n_bytes) {
  return add_tensor(w, name, dtype, n_dims, shape, data, n_bytes, false);
}

/* ---- header text ------------------------------------------------------------ */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  size_t need;
  if (brisk_add_overflow_size(b->len, n + 1, &need) ||
      brisk_grow((void **)&b->p, &b->cap, need, 1) != 0) {
    b->oom = true;
    return;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_u64(sbuf *b, uint64_t v) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
  put(b, tmp, (size_t)n);
}

/* A JSON string literal; the text is valid UTF-8 (checked on entry). */
static void put_str(sbuf *b, const char *s) {
  put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      put(b, esc, 2);
    } else if (c < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(b, esc, 6);
    } else {
      put(b, (const char *)&c, 1);
    }
  }
  put(b, "\"", 1);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Assigns offsets (4-byte types first, then 2-byte ones, each group in
 * insertion order, so every tensor stays aligned to its element size) and
 * builds the padded header. */
static brisk_status build_header(brisk_safetensors_writer *w, sbuf *hdr, uint64_t *data_size) {
  if (w->n) {
    char **names = brisk_malloc(w->n * sizeof(char *));
    if (!names) return brisk_error_oom();
    for (size_t i = 0; i < w->n; i++) names[i] = w->tensors[i].name;
    qsort(names, w->n, sizeof(char *), cmp_names);
    for (size_t i = 1; i < w->n; i++) {
      if (strcmp(names[i - 1], names[i]) == 0) {
        brisk_status s = brisk_error(BRISK_E_INVALID_ARGUMENT,
                                     "safetensors writer: tensor '%.200s' added twice", names[i]);
        brisk_free(names);
        return s;
      }
    }
    brisk_free(names);
  }
  uint64_t off = 0;
  for (uint32_t size = 4; size >= 2; size /= 2) {
    for (size_t i = 0; i < w->n; i++) {
      wtensor *t = &w->tensors[i];
      if (t->elem_size != size) continue;
      t->offset = off;
      if (brisk_add_overflow_u64(off, t->n_bytes, &off))
        return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors writer: data exceeds 2^64 bytes");
    }
  }
  *data_size = off;

  puts_(hdr, "{");
  bool first = true;
  if (w->n_meta) {
    puts_(hdr, "\"__metadata__\":{");
    for (size_t i = 0; i < w->n_meta; i++) {
      if (i) puts_(hdr, ",");
      put_str(hdr, w->meta[2 * i]);
      puts_(hdr, ":");
      put_str(hdr, w->meta[2 * i + 1]);
    }
    puts_(hdr, "}");
    first = false;
  }
  for (size_t i = 0; i < w->n; i++) {
    const wtensor *t = &w->tensors[i];
    if (!first) puts_(hdr, ",");
    first = false;
    put_str(hdr, t->name);
    puts_(hdr, ":{\"dtype\":\"");
    puts_(hdr, brisk_safetensors_dtype_name(t->dtype));
    puts_(hdr, "\",\"shape\":[");
    for (uint32_t d = 0; d < t->n_dims; d++) {
      if (d) puts_(hdr, ",");
      put_u64(hdr, t->shape[d]);
    }
    puts_(hdr, "],\"data_offsets\":[");
    put_u64(hdr, t->offset);
    puts_(hdr, ",");
    put_u64(hdr, t->offset + t->n_bytes);
    puts_(hdr, "]}");
  }
  puts_(hdr, "}");
  /* Spaces pad the header so that the data section starts 8-aligned. */
  while (!hdr->oom && hdr->len % 8) puts_(hdr, " ");
  if (hdr->oom) {
    brisk_free(hdr->p);
    hdr->p = NULL;
    return brisk_error_oom();
  }
  return BRISK_OK;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

brisk_status brisk_safetensors_writer_write_memory(brisk_safetensors_writer *w, void **data,
                                                   size_t *size) {
  if (!w || !data || !size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors writer: NULL");
  sbuf hdr = {0};
  uint64_t data_size;
  brisk_status s = build_header(w, &hdr, &data_size);
  if (s != BRISK_OK) return s;
  uint64_t total;
  if (brisk_add_overflow_u64(8 + (uint64_t)hdr.len, data_size, &total) || total > SIZE_MAX) {
    brisk_free(hdr.p);
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors writer: file too large for memory");
  }
  unsigned char *out = brisk_malloc((size_t)total);
  if (!out) {
    brisk_free(hdr.p);
    return brisk_error_oom();
  }
  put_le64(out, hdr.len);
  memcpy(out + 8, hdr.p, hdr.len);
  unsigned char *d = out + 8 + hdr.len;
  for (size_t i = 0; i < w->n; i++)
    if (w->tensors[i].n_bytes)
      memcpy(d + w->tensors[i].offset, w->tensors[i].data, (size_t)w->tensors[i].n_bytes);
  brisk_free(hdr.p);
  *data = out;
  *size = (size_t)total;
  return BRISK_OK;
}

static bool write_all(int fd, const void *p, uint64_t n) {
  const unsigned char *c = p;
  while (n) {
    size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
    ssize_t r = write(fd, c, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= (uint64_t)r;
  }
  return true;
}

brisk_status brisk_safetensors_writer_write_file(brisk_safetensors_writer *w, const char *path) {
  if (!w || !path) return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors writer: NULL");
  sbuf hdr = {0};
  uint64_t data_size;
  brisk_status s = build_header(w, &hdr, &data_size);
  if (s != BRISK_OK) return s;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    s = brisk_error(BRISK_E_IO, "cannot create %s: %s", path, strerror(errno));
    brisk_free(hdr.p);
    return s;
  }
  unsigned char len8[8];
  put_le64(len8, hdr.len);
  bool ok = write_all(fd, len8, 8) && write_all(fd, hdr.p, hdr.len);
  /* Data in offset order: the 4-byte group, then the 2-byte group. */
  for (uint32_t size = 4; ok && size >= 2; size /= 2)
    for (size_t i = 0; ok && i < w->n; i++)
      if (w->tensors[i].elem_size == size)
        ok = write_all(fd, w->tensors[i].data, w->tensors[i].n_bytes);
  if (!ok) s = brisk_error(BRISK_E_IO, "cannot write %s: %s", path, strerror(errno));
  if (close(fd) != 0 && ok)
    s = brisk_error(BRISK_E_IO, "cannot write %s: %s", path, strerror(errno));
  if (s != BRISK_OK) unlink(path);
  brisk_free(hdr.p);
  return s;
}
