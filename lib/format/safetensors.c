/* safetensors reader: maps the file and validates the whole header at open. */
#include "format/safetensors.h"

#include "core/alloc.h"
#include "core/arena.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "format/json.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct brisk_safetensors {
  const unsigned char *base; /* [size] the whole file */
  uint64_t size;
  void *map;                         /* non-NULL when mmap'ed: munmap(map, size) */
  void *buf;                         /* non-NULL when read: brisk_aligned_free */
  brisk_safetensors_tensor *tensors; /* [n_tensors] in header order */
  size_t n_tensors;
  const brisk_safetensors_tensor **by_name; /* [n_tensors] sorted by name */
  const char **meta;                        /* [2 * n_meta] key, value, key, value, ... */
  size_t n_meta;
  brisk_arena strings; /* names and metadata */
  bool skip_int;       /* integer tensors (model buffers) are left out of the listing */
};

/* Messages print at most this much of a name taken from the file. */
#define NAME_FMT "%.200s"

typedef struct dtype_entry {
  const char *name;
  uint32_t dtype;
  uint32_t size;
} dtype_entry;

static const dtype_entry dtypes[] = {
    {"F32", BRISK_DTYPE_F32, 4},
    {"F16", BRISK_DTYPE_F16, 2},
    {"BF16", BRISK_DTYPE_BF16, 2},
    /* GPTQ and AWQ checkpoints pack 4-bit weights, zero points and group
     * indices into int32 tensors. */
    {"I32", BRISK_DTYPE_I32, 4},
};

const char *brisk_safetensors_dtype_name(uint32_t dtype) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (dtypes[i].dtype == dtype) return dtypes[i].name;
  return NULL;
}

static const dtype_entry *dtype_lookup(const char *s, size_t len) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, s, len) == 0) return &dtypes[i];
  return NULL;
}

static uint64_t le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* "[4, 3]" into buf, for messages. */
static const char *fmt_shape(char *buf, size_t cap, const uint64_t *shape, uint32_t n) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}

/* ---- duplicate and NUL detection over the raw header ---------------------- */

typedef struct raw_key {
  const char *p;
  size_t len;
} raw_key;

typedef struct key_scan {
  raw_key *keys; /* NULL when only checking for NULs */
  size_t n;
  bool nul;
  const char *nul_key;
  size_t nul_len;
} key_scan;

static void on_key(void *ctx, const char *raw, size_t len, bool nul) {
  key_scan *ks = ctx;
  if (nul && !ks->nul) {
    ks->nul = true;
    ks->nul_key = raw;
    ks->nul_len = len;
  }
  if (ks->keys) ks->keys[ks->n] = (raw_key){raw, len};
  ks->n++;
}

static int cmp_raw_key(const void *a, const void *b) {
  const raw_key *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->p, y->p, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The header has more members than json-c kept, so a name repeats; find it
 * for the message. */
static brisk_status report_duplicate(const char *what, const char *text, size_t len,
                                     size_t n_members, size_t n_kept) {
  key_scan ks = {brisk_calloc(n_members, sizeof(raw_key)), 0, false, NULL, 0};
  if (!ks.keys) return brisk_error_oom();
  brisk_json_scan_top_keys(text, len, on_key, &ks);
  qsort(ks.keys, ks.n, sizeof(raw_key), cmp_raw_key);
  for (size_t i = 1; i < ks.n; i++) {
    if (cmp_raw_key(&ks.keys[i - 1], &ks.keys[i]) == 0) {
      int n = ks.keys[i].len > 200 ? 200 : (int)ks.keys[i].len;
      brisk_status s = brisk_error(BRISK_E_FORMAT, "%s: tensor name '%.*s' appears twice", what, n,
                                   ks.keys[i].p);
      brisk_free(ks.keys);
      return s;
    }
  }
  brisk_free(ks.keys);
  /* Spelled differently (escapes) but equal once decoded. */
  return brisk_error(BRISK_E_FORMAT, "%s: %zu header entries but only %zu distinct names", what,
                     n_members, n_kept);
}

/* ---- one header entry ---------------------------------------------------- */

static brisk_status get_field(struct json_object *entry, const char *what, const char *name,
                              const char *field, enum json_type type, struct json_object **out) {
  if (!json_object_object_get_ex(entry, field, out))
    return brisk_error(BRISK_E_FORMAT, "%s: tensor '" NAME_FMT "' has no \"%s\"", what, name,
                       field);
  if (!json_object_is_type(*out, type))
    return brisk_error(BRISK_E_FORMAT, "%s: tensor '" NAME_FMT "': \"%s\" is %s", what, name, field,
                       brisk_json_type_name(*out));
  return BRISK_OK;
}

static brisk_status parse_entry(brisk_safetensors_tensor *t, const char *what, const char *name,
                                struct json_object *entry, uint64_t data_size) {
  if (!json_object_is_type(entry, json_type_object))
    return brisk_error(BRISK_E_FORMAT, "%s: tensor '" NAME_FMT "': entry is %s, not an object",
                       what, name, brisk_json_type_name(entry));
  struct json_object *jdtype, *jshape, *joff;
  brisk_status s;
  if ((s = get_field(entry, what, name, "dtype", json_type_string, &jdtype)) != BRISK_OK ||
      (s = get_field(entry, what, name, "shape", json_type_array, &jshape)) != BRISK_OK ||
      (s = get_field(entry, what, name, "data_offsets", json_type_array, &joff)) != BRISK_OK)
    return s;

  char label[300];
  snprintf(label, sizeof label, "%s: tensor '" NAME_FMT "'", what, name);
  size_t n_dims = json_object_array_length(jshape);
  uint64_t shape[BRISK_SAFETENSORS_MAX_DIMS];
  for (size_t i = 0; i < n_dims; i++) {
    char key[32];
    snprintf(key, sizeof key, "shape[%zu]", i);
    uint64_t d;
    if ((s = brisk_json_as_uint(json_object_array_get_idx(jshape, i), label, key, &d)) != BRISK_OK)
      return s;
    if (i < BRISK_SAFETENSORS_MAX_DIMS) shape[i] = d;
  }
  if (json_object_array_length(joff) != 2)
    return brisk_error(BRISK_E_FORMAT, "%s: \"data_offsets\" has %zu entries, expected 2", label,
                       json_object_array_length(joff));
  uint64_t begin, end;
  if ((s = brisk_json_as_uint(json_object_array_get_idx(joff, 0), label, "data_offsets[0]",
                              &begin)) != BRISK_OK ||
      (s = brisk_json_as_uint(json_object_array_get_idx(joff, 1), label, "data_offsets[1]",
                              &end)) != BRISK_OK)
    return s;

  const char *dname = json_object_get_string(jdtype);
  size_t dlen = (size_t)json_object_get_string_len(jdtype);
  const dtype_entry *dt = dtype_lookup(dname, dlen);
  if (!dt)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: dtype '%.*s' is not supported (F32, F16, BF16 and I32 are)", label,
                       dlen > 32 ? 32 : (int)dlen, dname);
  if (n_dims > BRISK_SAFETENSORS_MAX_DIMS)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s has %zu dimensions; at most %d are supported",
                       label, n_dims, BRISK_SAFETENSORS_MAX_DIMS);

  if (begin > end)
    return brisk_error(BRISK_E_FORMAT, "%s: data_offsets [%llu, %llu] end before they begin", label,
                       (unsigned long long)begin, (unsigned long long)end);
  if (end > data_size)
    return brisk_error(
        BRISK_E_FORMAT, "%s: data_offsets [%llu, %llu] run past the %llu-byte data section", label,
        (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
  char sbuf[256];
  uint64_t n_el = 1, n_bytes;
  for (size_t i = 0; i < n_dims; i++)
    if (brisk_mul_overflow_u64(n_el, shape[i], &n_el))
      return brisk_error(BRISK_E_FORMAT, "%s: shape %s has more than 2^64 elements", label,
                         fmt_shape(sbuf, sizeof sbuf, shape, (uint32_t)n_dims));
  if (brisk_mul_overflow_u64(n_el, dt->size, &n_bytes))
    return brisk_error(BRISK_E_FORMAT, "%s: shape %s of %s has more than 2^64 bytes", label,
                       fmt_shape(sbuf, sizeof sbuf, shape, (uint32_t)n_dims), dt->name);
  if (end - begin != n_bytes)
    return brisk_error(
        BRISK_E_FORMAT,
        "%s: data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu", label,
        (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin),
        fmt_shape(sbuf, sizeof sbuf, shape, (uint32_t)n_dims), dt->name,
        (unsigned long long)n_bytes);

  t->dtype = dt->dtype;
  t->n_dims = (uint32_t)n_dims;
  for (size_t i = 0; i < BRISK_SAFETENSORS_MAX_DIMS; i++) t->shape[i] = i < n_dims ? shape[i] : 1;
  t->n_elements = n_el;
  t->offset = begin;
  t->n_bytes = n_bytes;
  return BRISK_OK;
}

static brisk_status parse_metadata(brisk_safetensors *st, const char *what,
                                   struct json_object *meta) {
  if (!json_object_is_type(meta, json_type_object))
    return brisk_error(BRISK_E_FORMAT, "%s: \"__metadata__\" is %s, not an object", what,
                       brisk_json_type_name(meta));
  size_t n = (size_t)json_object_object_length(meta);
  st->meta = brisk_calloc(n ? 2 * n : 1, sizeof(char *));
  if (!st->meta) return brisk_error_oom();
  json_object_object_foreach(meta, key, val) {
    if (!json_object_is_type(val, json_type_string))
      return brisk_error(BRISK_E_FORMAT, "%s: \"__metadata__\" value of '" NAME_FMT "' is %s", what,
                         key, brisk_json_type_name(val));
    const char *v = json_object_get_string(val);
    size_t vlen = (size_t)json_object_get_string_len(val);
    if (strlen(v) != vlen)
      return brisk_error(BRISK_E_FORMAT,
                         "%s: \"__metadata__\" value of '" NAME_FMT "' contains a NUL character",
                         what, key);
    const char *k = brisk_arena_strndup(&st->strings, key, strlen(key));
    const char *vv = brisk_arena_strndup(&st->strings, v, vlen);
    if (!k || !vv) return brisk_error_oom();
    st->meta[2 * st->n_meta] = k;
    st->meta[2 * st->n_meta + 1] = vv;
    st->n_meta++;
  }
  return BRISK_OK;
}

/* ---- sorting and cross-entry checks --------------------------------------- */

static int cmp_by_name(const void *a, const void *b) {
  const brisk_safetensors_tensor *x = *(const brisk_safetensors_tensor *const *)a;
  const brisk_safetensors_tensor *y = *(const brisk_safetensors_tensor *const *)b;
  return strcmp(x->name, y->name);
}

static int cmp_by_offset(const void *a, const void *b) {
  const brisk_safetensors_tensor *x = *(const brisk_safetensors_tensor *const *)a;
  const brisk_safetensors_tensor *y = *(const brisk_safetensors_tensor *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return (x->n_bytes > y->n_bytes) - (x->n_bytes < y->n_bytes);
}

static brisk_status check_layout(brisk_safetensors *st, const char *what) {
  size_t n = st->n_tensors;
  for (size_t i = 0; i < n; i++) st->by_name[i] = &st->tensors[i];
  qsort(st->by_name, n, sizeof *st->by_name, cmp_by_name);
  for (size_t i = 1; i < n; i++) {
    if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0)
      return brisk_error(BRISK_E_FORMAT, "%s: tensor name '" NAME_FMT "' appears twice", what,
                         st->by_name[i]->name);
  }
  if (n < 2) return BRISK_OK;
  const brisk_safetensors_tensor **order = brisk_malloc(n * sizeof *order);
  if (!order) return brisk_error_oom();
  memcpy(order, st->by_name, n * sizeof *order);
  qsort(order, n, sizeof *order, cmp_by_offset);
  brisk_status s = BRISK_OK;
  /* Empty tensors occupy no bytes and so overlap nothing. */
  const brisk_safetensors_tensor *prev = NULL;
  for (size_t i = 0; i < n && s == BRISK_OK; i++) {
    const brisk_safetensors_tensor *t = order[i];
    if (t->n_bytes == 0) continue;
    if (prev && prev->offset + prev->n_bytes > t->offset)
      s = brisk_error(BRISK_E_FORMAT,
                      "%s: tensors '" NAME_FMT "' [%llu, %llu] and '" NAME_FMT
                      "' [%llu, %llu] overlap",
                      what, prev->name, (unsigned long long)prev->offset,
                      (unsigned long long)(prev->offset + prev->n_bytes), t->name,
                      (unsigned long long)t->offset, (unsigned long long)(t->offset + t->n_bytes));
    prev = t;
  }
  brisk_free(order);
  return s;
}

/* ---- open ------------------------------------------------------------------ */

/* An entry of an integer dtype other than I32: transformers saves buffers
 * such as BERT's position_ids (I64) with the weights; they are never
 * weights. I32 is read: GPTQ and AWQ pack their 4-bit weights in it. */
static bool is_int_buffer(struct json_object *entry) {
  static const char *const ints[] = {"I64", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"};
  struct json_object *d = NULL;
  if (!json_object_is_type(entry, json_type_object) ||
      !json_object_object_get_ex(entry, "dtype", &d) || !json_object_is_type(d, json_type_string))
    return false;
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (!strcmp(json_object_get_string(d), ints[i])) return true;
  return false;
}

static brisk_status parse_header(brisk_safetensors *st, const char *what) {
  if (st->size < 8)
    return brisk_error(BRISK_E_FORMAT, "%s: %llu bytes is too short for a safetensors file", what,
                       (unsigned long long)st->size);
  uint64_t hlen = le64(st->base);
  if (hlen == 0) return brisk_error(BRISK_E_FORMAT, "%s: header length is 0", what);
  if (hlen > BRISK_SAFETENSORS_MAX_HEADER)
    return brisk_error(BRISK_E_FORMAT, "%s: header length %llu is over the %u-byte limit", what,
                       (unsigned long long)hlen, BRISK_SAFETENSORS_MAX_HEADER);
  if (hlen > st->size - 8)
    return brisk_error(BRISK_E_FORMAT,
                       "%s: header length %llu runs past the end of the %llu-byte file", what,
                       (unsigned long long)hlen, (unsigned long long)st->size);
  const char *text = (const char *)st->base + 8;
  if (text[0] != '{')
    return brisk_error(BRISK_E_FORMAT, "%s: header does not start with '{' (byte 0x%02x)", what,
                       (unsigned)(unsigned char)text[0]);
  char jwhat[300];
  snprintf(jwhat, sizeof jwhat, "%s: header", what);
  struct json_object *root = NULL;
  brisk_status s = brisk_json_parse(text, (size_t)hlen, true, jwhat, &root);
  if (s != BRISK_OK) return s;

  key_scan ks = {0};
  size_t n_members = brisk_json_scan_top_keys(text, (size_t)hlen, on_key, &ks);
  size_t n_kept = (size_t)json_object_object_length(root);
  if (ks.nul) {
    s = brisk_error(BRISK_E_FORMAT, "%s: name '%.*s' contains an escaped NUL", what,
                    ks.nul_len > 200 ? 200 : (int)ks.nul_len, ks.nul_key);
    goto done;
  }
  if (n_members != n_kept) {
    s = report_duplicate(what, text, (size_t)hlen, n_members, n_kept);
    goto done;
  }

  struct json_object *meta = NULL;
  bool has_meta = json_object_object_get_ex(root, "__metadata__", &meta);
  st->n_tensors = n_kept - (has_meta ? 1 : 0);
  uint64_t data_size = st->size - 8 - hlen;
  st->tensors = brisk_calloc(st->n_tensors ? st->n_tensors : 1, sizeof *st->tensors);
  st->by_name = brisk_calloc(st->n_tensors ? st->n_tensors : 1, sizeof *st->by_name);
  if (!st->tensors || !st->by_name) {
    s = brisk_error_oom();
    goto done;
  }
  if (has_meta && (s = parse_metadata(st, what, meta)) != BRISK_OK) goto done;

  const unsigned char *data = st->base + 8 + hlen;
  size_t i = 0;
  json_object_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) continue;
    if (st->skip_int && is_int_buffer(val)) {
      st->n_tensors--;
      continue;
    }
    brisk_safetensors_tensor *t = &st->tensors[i];
    if ((s = parse_entry(t, what, key, val, data_size)) != BRISK_OK) goto done;
    t->name = brisk_arena_strndup(&st->strings, key, strlen(key));
    if (!t->name) {
      s = brisk_error_oom();
      goto done;
    }
    t->data = data + t->offset;
    i++;
  }
  s = check_layout(st, what);
done:
  brisk_json_free(root);
  return s;
}

static void st_free(brisk_safetensors *st) {
  if (!st) return;
  if (st->map) munmap(st->map, (size_t)st->size);
  brisk_aligned_free(st->buf);
  brisk_free(st->tensors);
  brisk_free(st->by_name);
  brisk_free(st->meta);
  brisk_arena_free(&st->strings);
  brisk_free(st);
}

void brisk_safetensors_close(brisk_safetensors *st) { st_free(st); }

static brisk_safetensors *st_new(void) {
  brisk_safetensors *st = brisk_calloc(1, sizeof *st);
  if (st) brisk_arena_init(&st->strings, 4096);
  return st;
}

static brisk_status finish_open(brisk_safetensors *st, const char *what, brisk_safetensors **out) {
  brisk_status s = parse_header(st, what);
  if (s != BRISK_OK) {
    st_free(st);
    return s;
  }
  *out = st;
  return BRISK_OK;
}

brisk_status brisk_safetensors_open_memory(const void *data, size_t size, brisk_safetensors **out) {
  if (!out || (!data && size)) return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors: NULL");
  brisk_safetensors *st = st_new();
  if (!st) return brisk_error_oom();
  st->base = data;
  st->size = size;
  return finish_open(st, "<memory>", out);
}

static brisk_status read_exact(int fd, unsigned char *buf, uint64_t n, const char *path) {
  uint64_t got = 0;
  while (got < n) {
    size_t want = n - got > (1u << 30) ? (1u << 30) : (size_t)(n - got);
    ssize_t r = read(fd, buf + got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return brisk_error(BRISK_E_IO, "cannot read %s: %s", path, strerror(errno));
    if (r == 0)
      return brisk_error(BRISK_E_IO, "%s shrank while being read (%llu of %llu bytes)", path,
                         (unsigned long long)got, (unsigned long long)n);
    got += (uint64_t)r;
  }
  return BRISK_OK;
}

static brisk_status open_file(const char *path, bool try_map, bool skip_int,
                              brisk_safetensors **out) {
  if (!path || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "safetensors: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return brisk_error(BRISK_E_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    brisk_status s = brisk_error(BRISK_E_IO, "cannot stat %s: %s", path, strerror(errno));
    close(fd);
    return s;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return brisk_error(BRISK_E_IO, "%s is not a regular file", path);
  }
  brisk_safetensors *st = st_new();
  if (!st) {
    close(fd);
    return brisk_error_oom();
  }
  st->size = (uint64_t)sb.st_size;
  st->skip_int = skip_int;
  brisk_status s = BRISK_OK;
  if (st->size > SIZE_MAX) s = brisk_error(BRISK_E_IO, "%s does not fit in memory", path);
  /* Too short to hold a header: let the parser say so without mapping. */
  if (s == BRISK_OK && st->size >= 8) {
    void *m = try_map ? mmap(NULL, (size_t)st->size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) {
      st->map = m;
      st->base = m;
    } else {
      if (try_map) BRISK_DEBUG("mmap %s failed (%s); reading it", path, strerror(errno));
      st->buf = brisk_aligned_alloc(64, (size_t)st->size);
      if (!st->buf) s = brisk_error_oom();
      if (s == BRISK_OK) s = read_exact(fd, st->buf, st->size, path);
      st->base = st->buf;
    }
  }
  close(fd);
  if (s != BRISK_OK) {
    st_free(st);
    return s;
  }
  return finish_open(st, path, out);
}

brisk_status brisk_safetensors_open(const char *path, brisk_safetensors **out) {
  return open_file(path, true, false, out);
}

brisk_status brisk_safetensors_open_read(const char *path, brisk_safetensors **out) {
  return open_file(path, false, false, out);
}

brisk_status brisk_safetensors_open_model(const char *path, brisk_safetensors **out) {
  return open_file(path, true, true, out);
}

/* ---- accessors ------------------------------------------------------------ */

uint64_t brisk_safetensors_file_size(const brisk_safetensors *st) { return st->size; }
bool brisk_safetensors_is_mapped(const brisk_safetensors *st) { return st->map != NULL; }
size_t brisk_safetensors_n_tensors(const brisk_safetensors *st) { return st->n_tensors; }

const brisk_safetensors_tensor *brisk_safetensors_tensor_at(const brisk_safetensors *st, size_t i) {
  return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const brisk_safetensors_tensor *brisk_safetensors_find(const brisk_safetensors *st,
                                                       const char *name) {
  if (!name) return NULL;
  size_t lo = 0, hi = st->n_tensors;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const brisk_safetensors_tensor *t = st->by_name[mid];
    int c = strcmp(name, t->name);
    if (c == 0) return t;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

size_t brisk_safetensors_n_metadata(const brisk_safetensors *st) { return st->n_meta; }

bool brisk_safetensors_metadata_at(const brisk_safetensors *st, size_t i, const char **key,
                                   const char **value) {
  if (i >= st->n_meta) return false;
  if (key) *key = st->meta[2 * i];
  if (value) *value = st->meta[2 * i + 1];
  return true;
}

const char *brisk_safetensors_metadata(const brisk_safetensors *st, const char *key) {
  if (!key) return NULL;
  for (size_t i = 0; i < st->n_meta; i++)
    if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
  return NULL;
}
