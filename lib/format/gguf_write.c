/* GGUF writer. Metadata is serialized as it is added (one growing byte
 * buffer); tensors are kept as copies and laid out when the file is
 * written: the data section starts at the first alignment boundary after
 * the tensor infos and each tensor's data is padded to the alignment. Every
 * setter either succeeds or leaves the writer as it was. */
#include "format/gguf_internal.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long ull; /* for printf */

#define ALIGNMENT_KEY "general.alignment"
#define HEADER_BYTES (4 + 4 + 8 + 8)
#define FILE_BUFFER_BYTES (1u << 20)

typedef struct wtensor {
  char *name;
  uint32_t type, n_dims;
  uint64_t ne[BRISK_GGUF_MAX_DIMS];
  uint64_t n_bytes;
  unsigned char *data; /* [n_bytes], a copy */
} wtensor;

struct brisk_gguf_writer {
  uint32_t version, alignment;
  unsigned char *kv_bytes; /* [kv_len] serialized entries, in order */
  size_t kv_len, kv_cap;
  char **keys; /* [n_kv] */
  size_t n_kv, keys_cap;
  brisk_gguf_index key_index;
  wtensor *tensors; /* [n_tensors] */
  size_t n_tensors, tensors_cap;
  brisk_gguf_index tensor_index;
};

static const char *key_name(const void *w, int64_t i) {
  return ((const brisk_gguf_writer *)w)->keys[i];
}
static const char *tensor_name(const void *w, int64_t i) {
  return ((const brisk_gguf_writer *)w)->tensors[i].name;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static brisk_status check_name(const char *what, const char *name) {
  if (!name) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL %s name", what);
  size_t len = strlen(name);
  if (len == 0) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: empty %s name", what);
  if (!brisk_gguf_name_valid(name, len))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf writer: %s name is not valid UTF-8 without control characters", what);
  return BRISK_OK;
}

/* What one kv holds: a scalar (`value`), a string (`strs`[0]), or an array
 * of n numbers (`value`) or n strings (`strs` or `cstrs`). */
typedef struct kv_value {
  brisk_gguf_type type, elem_type;
  const void *value;
  uint64_t n;
  const brisk_gguf_str *strs;
  const char *const *cstrs;
} kv_value;

static brisk_gguf_str string_at(const kv_value *v, uint64_t j) {
  if (v->cstrs) return (brisk_gguf_str){v->cstrs[j], strlen(v->cstrs[j])};
  return v->strs[j];
}

/* Encoded size of the value part (after the type), or false on overflow. */
static bool value_bytes(const kv_value *v, size_t *out) {
  if (v->type == BRISK_GGUF_STRING) return !brisk_add_overflow_size(8, v->strs[0].len, out);
  if (v->type != BRISK_GGUF_ARRAY) return (*out = brisk_gguf_type_size(v->type)), true;
  size_t total = 4 + 8, part;
  if (v->elem_type != BRISK_GGUF_STRING)
    return !brisk_mul_overflow_size(v->n, brisk_gguf_type_size(v->elem_type), &part) &&
           !brisk_add_overflow_size(total, part, out);
  for (uint64_t j = 0; j < v->n; j++) {
    brisk_gguf_str s = string_at(v, j);
    if (brisk_add_overflow_size(total, 8, &total) || brisk_add_overflow_size(total, s.len, &total))
      return false;
  }
  *out = total;
  return true;
}

static unsigned char *write_value(unsigned char *p, const kv_value *v) {
  if (v->type == BRISK_GGUF_STRING) {
    put_u64(p, v->strs[0].len);
    if (v->strs[0].len) memcpy(p + 8, v->strs[0].ptr, v->strs[0].len);
    return p + 8 + v->strs[0].len;
  }
  if (v->type != BRISK_GGUF_ARRAY) {
    memcpy(p, v->value, brisk_gguf_type_size(v->type));
    return p + brisk_gguf_type_size(v->type);
  }
  put_u32(p, v->elem_type);
  put_u64(p + 4, v->n);
  p += 12;
  if (v->elem_type != BRISK_GGUF_STRING) {
    size_t bytes = v->n * brisk_gguf_type_size(v->elem_type);
    if (bytes) memcpy(p, v->value, bytes);
    return p + bytes;
  }
  for (uint64_t j = 0; j < v->n; j++) {
    brisk_gguf_str s = string_at(v, j);
    put_u64(p, s.len);
    if (s.len) memcpy(p + 8, s.ptr, s.len);
    p += 8 + s.len;
  }
  return p;
}

/* Validates the key, reserves every allocation, then serializes: nothing
 * can fail after the first byte is written. */
static brisk_status add_kv(brisk_gguf_writer *w, const char *key, const kv_value *v,
                           bool internal) {
  if (!w) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL writer");
  brisk_status st = check_name("key", key);
  if (st) return st;
  if (!internal && strcmp(key, ALIGNMENT_KEY) == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf writer: '" ALIGNMENT_KEY "' is set by brisk_gguf_writer_create");
  uint64_t h = brisk_gguf_name_hash(key);
  if (brisk_gguf_index_find(&w->key_index, key, h, key_name, w) >= 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: duplicate key '%s'", key);
  size_t key_len = strlen(key), val, need;
  if (!value_bytes(v, &val) || brisk_add_overflow_size(8 + 4, key_len, &need) ||
      brisk_add_overflow_size(need, val, &need) || brisk_add_overflow_size(need, w->kv_len, &need))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': value too large", key);
  if (brisk_grow((void **)&w->kv_bytes, &w->kv_cap, need, 1) ||
      brisk_grow((void **)&w->keys, &w->keys_cap, w->n_kv + 1, sizeof *w->keys) ||
      brisk_gguf_index_reserve(&w->key_index, w->n_kv + 1))
    return brisk_error_oom();
  char *copy = brisk_strdup(key);
  if (!copy) return brisk_error_oom();
  unsigned char *p = w->kv_bytes + w->kv_len;
  put_u64(p, key_len);
  memcpy(p + 8, key, key_len);
  put_u32(p + 8 + key_len, v->type);
  p = write_value(p + 12 + key_len, v);
  w->kv_len = (size_t)(p - w->kv_bytes);
  w->keys[w->n_kv] = copy;
  brisk_gguf_index_put(&w->key_index, h, (int64_t)w->n_kv);
  w->n_kv++;
  return BRISK_OK;
}

brisk_status brisk_gguf_writer_create(uint32_t version, uint32_t alignment,
                                      brisk_gguf_writer **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL out");
  if (version != 2 && version != 3)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: version %u (only 2 and 3)", version);
  if (alignment == 0) alignment = BRISK_GGUF_DEFAULT_ALIGNMENT;
  if (alignment & (alignment - 1))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: alignment %u is not a power of two",
                       alignment);
  brisk_gguf_writer *w = brisk_calloc(1, sizeof *w);
  if (!w) return brisk_error_oom();
  w->version = version;
  w->alignment = alignment;
  if (alignment != BRISK_GGUF_DEFAULT_ALIGNMENT) {
    unsigned char le[4];
    put_u32(le, alignment);
    kv_value v = {.type = BRISK_GGUF_UINT32, .value = le};
    brisk_status st = add_kv(w, ALIGNMENT_KEY, &v, true);
    if (st) {
      brisk_gguf_writer_free(w);
      return st;
    }
  }
  *out = w;
  return BRISK_OK;
}

void brisk_gguf_writer_free(brisk_gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) brisk_free(w->keys[i]);
  for (size_t i = 0; i < w->n_tensors; i++) {
    brisk_free(w->tensors[i].name);
    brisk_free(w->tensors[i].data);
  }
  brisk_free(w->keys);
  brisk_free(w->kv_bytes);
  brisk_free(w->tensors);
  brisk_gguf_index_free(&w->key_index);
  brisk_gguf_index_free(&w->tensor_index);
  brisk_free(w);
}

brisk_status brisk_gguf_writer_set_scalar(brisk_gguf_writer *w, const char *key,
                                          brisk_gguf_type type, const void *value) {
  if (!brisk_gguf_type_size(type))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': type %u is not a scalar",
                       key ? key : "(null)", (unsigned)type);
  if (!value)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL value",
                       key ? key : "(null)");
  if (type == BRISK_GGUF_BOOL && *(const unsigned char *)value > 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': bool value %u",
                       key ? key : "(null)", *(const unsigned char *)value);
  kv_value v = {.type = type, .value = value};
  return add_kv(w, key, &v, false);
}

brisk_status brisk_gguf_writer_set_u32(brisk_gguf_writer *w, const char *key, uint32_t v) {
  unsigned char le[4];
  put_u32(le, v);
  return brisk_gguf_writer_set_scalar(w, key, BRISK_GGUF_UINT32, le);
}

brisk_status brisk_gguf_writer_set_i32(brisk_gguf_writer *w, const char *key, int32_t v) {
  unsigned char le[4];
  put_u32(le, (uint32_t)v);
  return brisk_gguf_writer_set_scalar(w, key, BRISK_GGUF_INT32, le);
}

brisk_status brisk_gguf_writer_set_u64(brisk_gguf_writer *w, const char *key, uint64_t v) {
  unsigned char le[8];
  put_u64(le, v);
  return brisk_gguf_writer_set_scalar(w, key, BRISK_GGUF_UINT64, le);
}

brisk_status brisk_gguf_writer_set_f32(brisk_gguf_writer *w, const char *key, float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  unsigned char le[4];
  put_u32(le, bits);
  return brisk_gguf_writer_set_scalar(w, key, BRISK_GGUF_FLOAT32, le);
}

brisk_status brisk_gguf_writer_set_bool(brisk_gguf_writer *w, const char *key, bool v) {
  unsigned char b = v ? 1 : 0;
  return brisk_gguf_writer_set_scalar(w, key, BRISK_GGUF_BOOL, &b);
}

brisk_status brisk_gguf_writer_set_strn(brisk_gguf_writer *w, const char *key, const char *s,
                                        uint64_t len) {
  if (!s && len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL string",
                       key ? key : "(null)");
  brisk_gguf_str str = {s, len};
  kv_value v = {.type = BRISK_GGUF_STRING, .strs = &str};
  return add_kv(w, key, &v, false);
}

brisk_status brisk_gguf_writer_set_str(brisk_gguf_writer *w, const char *key, const char *s) {
  if (!s)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL string",
                       key ? key : "(null)");
  return brisk_gguf_writer_set_strn(w, key, s, strlen(s));
}

brisk_status brisk_gguf_writer_set_arr(brisk_gguf_writer *w, const char *key,
                                       brisk_gguf_type elem_type, const void *data, uint64_t n) {
  const char *k = key ? key : "(null)";
  if (!brisk_gguf_type_size(elem_type))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf writer: key '%s': element type %u is not a number or bool "
                       "(strings: brisk_gguf_writer_set_arr_str; arrays of arrays: unsupported)",
                       k, (unsigned)elem_type);
  if (!data && n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL data", k);
  if (elem_type == BRISK_GGUF_BOOL)
    for (uint64_t j = 0; j < n; j++)
      if (((const unsigned char *)data)[j] > 1)
        return brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "gguf writer: key '%s': bool element %llu is %u", k, (ull)j,
                           ((const unsigned char *)data)[j]);
  kv_value v = {.type = BRISK_GGUF_ARRAY, .elem_type = elem_type, .value = data, .n = n};
  return add_kv(w, key, &v, false);
}

brisk_status brisk_gguf_writer_set_arr_str(brisk_gguf_writer *w, const char *key,
                                           const char *const *strs, uint64_t n) {
  const char *k = key ? key : "(null)";
  if (!strs && n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL strings", k);
  for (uint64_t j = 0; j < n; j++)
    if (!strs[j])
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': string %llu is NULL", k,
                         (ull)j);
  kv_value v = {.type = BRISK_GGUF_ARRAY, .elem_type = BRISK_GGUF_STRING, .n = n, .cstrs = strs};
  return add_kv(w, key, &v, false);
}

brisk_status brisk_gguf_writer_set_arr_strn(brisk_gguf_writer *w, const char *key,
                                            const brisk_gguf_str *strs, uint64_t n) {
  const char *k = key ? key : "(null)";
  if (!strs && n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': NULL strings", k);
  for (uint64_t j = 0; j < n; j++)
    if (!strs[j].ptr && strs[j].len)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: key '%s': string %llu is NULL", k,
                         (ull)j);
  kv_value v = {.type = BRISK_GGUF_ARRAY, .elem_type = BRISK_GGUF_STRING, .n = n, .strs = strs};
  if (n == 0) v.strs = NULL, v.cstrs = NULL;
  return add_kv(w, key, &v, false);
}

static brisk_status check_tensor(const brisk_gguf_writer *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const uint64_t *ne, const void *data,
                                 uint64_t n_bytes) {
  if (!w) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL writer");
  brisk_status st = check_name("tensor", name);
  if (st) return st;
  if (brisk_gguf_index_find(&w->tensor_index, name, brisk_gguf_name_hash(name), tensor_name, w) >=
      0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: duplicate tensor '%s'", name);
  const brisk_dtype_info *info = brisk_dtype_get(type);
  if (!info)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: tensor '%s': unknown type id %u",
                       name, type);
  if (n_dims < 1 || n_dims > BRISK_GGUF_MAX_DIMS || !ne)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: tensor '%s': n_dims %u not in 1..%d",
                       name, n_dims, BRISK_GGUF_MAX_DIMS);
  uint64_t n = 1, row_bytes, need;
  for (uint32_t d = 0; d < n_dims; d++)
    if (ne[d] == 0 || brisk_mul_overflow_u64(n, ne[d], &n) || n > (uint64_t)INT64_MAX)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "gguf writer: tensor '%s': dim %u (%llu) is 0 or the size overflows", name,
                         d, (ull)ne[d]);
  if (!brisk_dtype_row_bytes(type, ne[0], &row_bytes))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf writer: tensor '%s': row length %llu is not a multiple of the %s "
                       "block size %u",
                       name, (ull)ne[0], info->name, info->block_size);
  if (brisk_mul_overflow_u64(row_bytes, n / ne[0], &need) || need != n_bytes)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "gguf writer: tensor '%s': %llu bytes given, type %s of this shape needs "
                       "%llu",
                       name, (ull)n_bytes, info->name, (ull)need);
  if (!data)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: tensor '%s': NULL data", name);
  if (n_bytes > SIZE_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: tensor '%s': too large", name);
  return BRISK_OK;
}

brisk_status brisk_gguf_writer_add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type,
                                          uint32_t n_dims, const uint64_t *ne, const void *data,
                                          uint64_t n_bytes) {
  brisk_status st = check_tensor(w, name, type, n_dims, ne, data, n_bytes);
  if (st) return st;
  if (brisk_grow((void **)&w->tensors, &w->tensors_cap, w->n_tensors + 1, sizeof *w->tensors) ||
      brisk_gguf_index_reserve(&w->tensor_index, w->n_tensors + 1))
    return brisk_error_oom();
  wtensor t = {.name = brisk_strdup(name), .type = type, .n_dims = n_dims, .n_bytes = n_bytes};
  t.data = brisk_malloc((size_t)n_bytes);
  if (!t.name || !t.data) {
    brisk_free(t.name);
    brisk_free(t.data);
    return brisk_error_oom();
  }
  memcpy(t.data, data, (size_t)n_bytes);
  for (uint32_t d = 0; d < BRISK_GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
  w->tensors[w->n_tensors] = t;
  brisk_gguf_index_put(&w->tensor_index, brisk_gguf_name_hash(name), (int64_t)w->n_tensors);
  w->n_tensors++;
  return BRISK_OK;
}

/* File layout: where the data section starts and the total size. Tensor i
 * sits at the first aligned offset after tensor i-1's data. */
static bool layout(const brisk_gguf_writer *w, uint64_t *data_offset, uint64_t *total) {
  uint64_t pos = HEADER_BYTES + (uint64_t)w->kv_len;
  for (size_t i = 0; i < w->n_tensors; i++)
    if (brisk_add_overflow_u64(
            pos, 8 + strlen(w->tensors[i].name) + 4 + 8ull * w->tensors[i].n_dims + 4 + 8, &pos))
      return false;
  if (w->n_tensors == 0) return (*data_offset = *total = pos), true;
  if (brisk_align_up_u64(pos, w->alignment, data_offset)) return false;
  uint64_t off = 0;
  for (size_t i = 0; i < w->n_tensors; i++)
    if (brisk_add_overflow_u64(off, w->tensors[i].n_bytes, &off) ||
        brisk_align_up_u64(off, w->alignment, &off))
      return false;
  return !brisk_add_overflow_u64(*data_offset, off, total);
}

/* Output to memory (exact size preallocated) or to a file descriptor
 * through a buffer. The first failure sticks in `st`. */
typedef struct sink {
  unsigned char *buf; /* [cap] */
  size_t len, cap;
  int fd; /* -1: memory */
  const char *path;
  uint64_t written;
  brisk_status st;
} sink;

static void flush(sink *s) {
  size_t done = 0;
  while (!s->st && done < s->len) {
    ssize_t n = write(s->fd, s->buf + done, s->len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      s->st = brisk_error(BRISK_E_IO, "cannot write '%s': %s", s->path,
                          n < 0 ? strerror(errno) : "no progress");
    else
      done += (size_t)n;
  }
  s->len = 0;
}

static void emit(sink *s, const void *p, size_t n) {
  const unsigned char *b = p;
  s->written += n;
  while (n && !s->st) {
    if (s->len == s->cap) flush(s); /* only file sinks fill up */
    size_t k = s->cap - s->len < n ? s->cap - s->len : n;
    memcpy(s->buf + s->len, b, k);
    s->len += k, b += k, n -= k;
  }
}

static void pad_to(sink *s, uint64_t offset) {
  static const unsigned char zeros[256];
  while (s->written < offset) {
    uint64_t n = offset - s->written;
    emit(s, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
  }
}

static void serialize(const brisk_gguf_writer *w, sink *s, uint64_t data_offset) {
  unsigned char hdr[HEADER_BYTES];
  memcpy(hdr, "GGUF", 4);
  put_u32(hdr + 4, w->version);
  put_u64(hdr + 8, w->n_tensors);
  put_u64(hdr + 16, w->n_kv);
  emit(s, hdr, sizeof hdr);
  emit(s, w->kv_bytes, w->kv_len);
  uint64_t off = 0;
  for (size_t i = 0; i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    unsigned char b[8 * BRISK_GGUF_MAX_DIMS + 8];
    size_t name_len = strlen(t->name);
    put_u64(b, name_len);
    emit(s, b, 8);
    emit(s, t->name, name_len);
    put_u32(b, t->n_dims);
    emit(s, b, 4);
    for (uint32_t d = 0; d < t->n_dims; d++) put_u64(b + 8 * d, t->ne[d]);
    emit(s, b, 8 * t->n_dims);
    put_u32(b, t->type);
    put_u64(b + 4, off);
    emit(s, b, 12);
    brisk_align_up_u64(off + t->n_bytes, w->alignment, &off); /* checked by layout() */
  }
  if (w->n_tensors == 0) return;
  pad_to(s, data_offset);
  for (size_t i = 0; i < w->n_tensors; i++) {
    emit(s, w->tensors[i].data, (size_t)w->tensors[i].n_bytes);
    uint64_t end;
    brisk_align_up_u64(s->written, w->alignment, &end);
    pad_to(s, end);
  }
}

brisk_status brisk_gguf_writer_write_memory(brisk_gguf_writer *w, void **data, size_t *size) {
  if (!w || !data || !size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL argument");
  uint64_t data_offset, total;
  if (!layout(w, &data_offset, &total) || total > SIZE_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: the file would be too large");
  sink s = {.buf = brisk_malloc((size_t)total), .cap = (size_t)total, .fd = -1};
  if (!s.buf) return brisk_error_oom();
  serialize(w, &s, data_offset);
  *data = s.buf;
  *size = s.len;
  return BRISK_OK;
}

brisk_status brisk_gguf_writer_write_file(brisk_gguf_writer *w, const char *path) {
  if (!w || !path) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: NULL argument");
  uint64_t data_offset, total;
  if (!layout(w, &data_offset, &total))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gguf writer: the file would be too large");
  sink s = {.buf = brisk_malloc(FILE_BUFFER_BYTES), .cap = FILE_BUFFER_BYTES, .path = path};
  if (!s.buf) return brisk_error_oom();
  s.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s.fd < 0) {
    brisk_free(s.buf);
    return brisk_error(BRISK_E_IO, "cannot create '%s': %s", path, strerror(errno));
  }
  serialize(w, &s, data_offset);
  flush(&s);
  if (close(s.fd) != 0 && !s.st)
    s.st = brisk_error(BRISK_E_IO, "cannot write '%s': %s", path, strerror(errno));
  brisk_free(s.buf);
  if (s.st) unlink(path); /* no half-written model left behind */
  return s.st;
}
