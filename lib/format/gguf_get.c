/* GGUF accessors: everything was validated at open, so these only check
 * their own arguments (an index out of range, a NULL handle or key). */
#include "format/gguf_internal.h"

#include "core/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

uint32_t brisk_gguf_version(const brisk_gguf *g) { return g ? g->version : 0; }
uint32_t brisk_gguf_alignment(const brisk_gguf *g) { return g ? g->alignment : 0; }
uint64_t brisk_gguf_file_size(const brisk_gguf *g) { return g ? g->size : 0; }
bool brisk_gguf_is_mapped(const brisk_gguf *g) {
  return g && g->storage == BRISK_GGUF_STORAGE_MAPPED;
}
uint64_t brisk_gguf_data_offset(const brisk_gguf *g) { return g ? g->data_offset : 0; }
const void *brisk_gguf_bytes(const brisk_gguf *g) { return g ? g->base : NULL; }

int64_t brisk_gguf_n_kv(const brisk_gguf *g) { return g ? (int64_t)g->n_kv : 0; }

int64_t brisk_gguf_find_key(const brisk_gguf *g, const char *key) {
  if (!g || !key) return -1;
  return brisk_gguf_index_find(&g->key_index, key, brisk_gguf_name_hash(key), brisk_gguf_kv_name,
                               g);
}

static const brisk_gguf_kv *kv_at(const brisk_gguf *g, int64_t i) {
  return g && i >= 0 && (uint64_t)i < g->n_kv ? &g->kvs[i] : NULL;
}

const char *brisk_gguf_key(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv ? kv->key : NULL;
}

brisk_gguf_type brisk_gguf_kv_type(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv ? kv->type : (brisk_gguf_type)-1;
}

brisk_gguf_type brisk_gguf_kv_arr_type(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv && kv->type == BRISK_GGUF_ARRAY ? kv->elem_type : BRISK_GGUF_UINT8;
}

uint64_t brisk_gguf_kv_arr_len(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv && kv->type == BRISK_GGUF_ARRAY ? kv->n : 0;
}

const void *brisk_gguf_kv_scalar(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv && brisk_gguf_type_size(kv->type) ? kv->scalar : NULL;
}

brisk_gguf_str brisk_gguf_kv_str(const brisk_gguf *g, int64_t i) {
  const brisk_gguf_kv *kv = kv_at(g, i);
  return kv && kv->type == BRISK_GGUF_STRING ? kv->str : (brisk_gguf_str){NULL, 0};
}

/* The kv for `key`, or a NOT_FOUND / INVALID_ARGUMENT status. */
static brisk_status lookup(const brisk_gguf *g, const char *key, const brisk_gguf_kv **out) {
  if (!g || !key)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_gguf_get: NULL %s", g ? "key" : "handle");
  int64_t i = brisk_gguf_find_key(g, key);
  if (i < 0) return brisk_error(BRISK_E_NOT_FOUND, "key '%s' not found", key);
  *out = &g->kvs[i];
  return BRISK_OK;
}

static brisk_status wrong_type(const brisk_gguf_kv *kv, const char *expected) {
  return brisk_error(BRISK_E_FORMAT, "key '%s' has type %s, expected %s", kv->key,
                     brisk_gguf_type_name(kv->type), expected);
}

/* An integer kv as a signed or an unsigned 64-bit value. */
typedef struct int_value {
  bool is_signed;
  int64_t s;
  uint64_t u;
} int_value;

static brisk_status get_int(const brisk_gguf *g, const char *key, const brisk_gguf_kv **kvp,
                            int_value *v) {
  brisk_status st = lookup(g, key, kvp);
  if (st) return st;
  const brisk_gguf_kv *kv = *kvp;
  const unsigned char *p = kv->scalar;
  uint64_t raw = 0;
  for (int k = 7; k >= 0; k--) raw = raw << 8 | p[k];
  switch (kv->type) {
  case BRISK_GGUF_UINT8:
  case BRISK_GGUF_UINT16:
  case BRISK_GGUF_UINT32:
  case BRISK_GGUF_UINT64: *v = (int_value){false, 0, raw}; return BRISK_OK;
  case BRISK_GGUF_INT8: *v = (int_value){true, (int8_t)raw, 0}; return BRISK_OK;
  case BRISK_GGUF_INT16: *v = (int_value){true, (int16_t)raw, 0}; return BRISK_OK;
  case BRISK_GGUF_INT32: *v = (int_value){true, (int32_t)raw, 0}; return BRISK_OK;
  case BRISK_GGUF_INT64: *v = (int_value){true, (int64_t)raw, 0}; return BRISK_OK;
  default: return wrong_type(kv, "an integer");
  }
}

static brisk_status does_not_fit(const brisk_gguf_kv *kv, const int_value *v, const char *type) {
  if (v->is_signed)
    return brisk_error(BRISK_E_FORMAT, "key '%s': value %" PRId64 " does not fit in %s", kv->key,
                       v->s, type);
  return brisk_error(BRISK_E_FORMAT, "key '%s': value %" PRIu64 " does not fit in %s", kv->key,
                     v->u, type);
}

brisk_status brisk_gguf_get_u32(const brisk_gguf *g, const char *key, uint32_t *out) {
  const brisk_gguf_kv *kv;
  int_value v;
  brisk_status st = get_int(g, key, &kv, &v);
  if (st) return st;
  if (v.is_signed ? v.s < 0 || v.s > (int64_t)UINT32_MAX : v.u > UINT32_MAX)
    return does_not_fit(kv, &v, "u32");
  *out = v.is_signed ? (uint32_t)v.s : (uint32_t)v.u;
  return BRISK_OK;
}

brisk_status brisk_gguf_get_i32(const brisk_gguf *g, const char *key, int32_t *out) {
  const brisk_gguf_kv *kv;
  int_value v;
  brisk_status st = get_int(g, key, &kv, &v);
  if (st) return st;
  if (v.is_signed ? v.s < INT32_MIN || v.s > INT32_MAX : v.u > INT32_MAX)
    return does_not_fit(kv, &v, "i32");
  *out = v.is_signed ? (int32_t)v.s : (int32_t)v.u;
  return BRISK_OK;
}

brisk_status brisk_gguf_get_u64(const brisk_gguf *g, const char *key, uint64_t *out) {
  const brisk_gguf_kv *kv;
  int_value v;
  brisk_status st = get_int(g, key, &kv, &v);
  if (st) return st;
  if (v.is_signed && v.s < 0) return does_not_fit(kv, &v, "u64");
  *out = v.is_signed ? (uint64_t)v.s : v.u;
  return BRISK_OK;
}

brisk_status brisk_gguf_get_i64(const brisk_gguf *g, const char *key, int64_t *out) {
  const brisk_gguf_kv *kv;
  int_value v;
  brisk_status st = get_int(g, key, &kv, &v);
  if (st) return st;
  if (!v.is_signed && v.u > INT64_MAX) return does_not_fit(kv, &v, "i64");
  *out = v.is_signed ? v.s : (int64_t)v.u;
  return BRISK_OK;
}

static brisk_status get_float(const brisk_gguf *g, const char *key, double *out) {
  const brisk_gguf_kv *kv;
  brisk_status st = lookup(g, key, &kv);
  if (st) return st;
  if (kv->type == BRISK_GGUF_FLOAT32) {
    float f;
    memcpy(&f, kv->scalar, 4);
    *out = f;
  } else if (kv->type == BRISK_GGUF_FLOAT64) {
    memcpy(out, kv->scalar, 8);
  } else {
    return wrong_type(kv, "f32 or f64");
  }
  return BRISK_OK;
}

brisk_status brisk_gguf_get_f32(const brisk_gguf *g, const char *key, float *out) {
  double d;
  brisk_status st = get_float(g, key, &d);
  if (!st) *out = (float)d;
  return st;
}

brisk_status brisk_gguf_get_f64(const brisk_gguf *g, const char *key, double *out) {
  double d;
  brisk_status st = get_float(g, key, &d);
  if (!st) *out = d;
  return st;
}

brisk_status brisk_gguf_get_bool(const brisk_gguf *g, const char *key, bool *out) {
  const brisk_gguf_kv *kv;
  brisk_status st = lookup(g, key, &kv);
  if (st) return st;
  if (kv->type != BRISK_GGUF_BOOL) return wrong_type(kv, "bool");
  *out = kv->scalar[0] != 0;
  return BRISK_OK;
}

brisk_status brisk_gguf_get_str(const brisk_gguf *g, const char *key, brisk_gguf_str *out) {
  const brisk_gguf_kv *kv;
  brisk_status st = lookup(g, key, &kv);
  if (st) return st;
  if (kv->type != BRISK_GGUF_STRING) return wrong_type(kv, "string");
  *out = kv->str;
  return BRISK_OK;
}

brisk_status brisk_gguf_get_scalar(const brisk_gguf *g, const char *key, brisk_gguf_type type,
                                   void *out) {
  const brisk_gguf_kv *kv;
  brisk_status st = lookup(g, key, &kv);
  if (st) return st;
  if (!brisk_gguf_type_size(type) || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_gguf_get_scalar: type %s is not a scalar",
                       brisk_gguf_type_name(type));
  if (kv->type != type) return wrong_type(kv, brisk_gguf_type_name(type));
  memcpy(out, kv->scalar, brisk_gguf_type_size(type));
  return BRISK_OK;
}

brisk_status brisk_gguf_get_arr(const brisk_gguf *g, const char *key, brisk_gguf_type *elem_type,
                                uint64_t *len) {
  const brisk_gguf_kv *kv;
  brisk_status st = lookup(g, key, &kv);
  if (st) return st;
  if (kv->type != BRISK_GGUF_ARRAY) return wrong_type(kv, "array");
  if (elem_type) *elem_type = kv->elem_type;
  if (len) *len = kv->n;
  return BRISK_OK;
}

const void *brisk_gguf_arr_data(const brisk_gguf *g, int64_t kv_index) {
  const brisk_gguf_kv *kv = kv_at(g, kv_index);
  return kv && kv->type == BRISK_GGUF_ARRAY ? (const void *)kv->arr : NULL;
}

brisk_gguf_str brisk_gguf_arr_str(const brisk_gguf *g, int64_t kv_index, uint64_t j) {
  const brisk_gguf_kv *kv = kv_at(g, kv_index);
  if (!kv || kv->type != BRISK_GGUF_ARRAY || kv->elem_type != BRISK_GGUF_STRING || j >= kv->n)
    return (brisk_gguf_str){NULL, 0};
  return kv->strs[j];
}

void brisk_gguf_format_value(const brisk_gguf *g, int64_t i, char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  const brisk_gguf_kv *kv = kv_at(g, i);
  if (!kv) {
    buf[0] = 0;
    return;
  }
  const unsigned char *p = kv->scalar;
  uint64_t raw = 0;
  for (int k = 7; k >= 0; k--) raw = raw << 8 | p[k];
  float f;
  double d;
  switch (kv->type) {
  case BRISK_GGUF_UINT8:
  case BRISK_GGUF_UINT16:
  case BRISK_GGUF_UINT32:
  case BRISK_GGUF_UINT64: snprintf(buf, cap, "%" PRIu64, raw); break;
  case BRISK_GGUF_INT8: snprintf(buf, cap, "%d", (int8_t)raw); break;
  case BRISK_GGUF_INT16: snprintf(buf, cap, "%d", (int16_t)raw); break;
  case BRISK_GGUF_INT32: snprintf(buf, cap, "%" PRId32, (int32_t)raw); break;
  case BRISK_GGUF_INT64: snprintf(buf, cap, "%" PRId64, (int64_t)raw); break;
  case BRISK_GGUF_FLOAT32:
    memcpy(&f, p, 4);
    snprintf(buf, cap, "%.9g", f); /* shortest width that round-trips any float */
    break;
  case BRISK_GGUF_FLOAT64:
    memcpy(&d, p, 8);
    snprintf(buf, cap, "%.17g", d);
    break;
  case BRISK_GGUF_BOOL: snprintf(buf, cap, "%s", raw ? "true" : "false"); break;
  case BRISK_GGUF_STRING: snprintf(buf, cap, "%s", kv->str.ptr); break;
  case BRISK_GGUF_ARRAY:
    snprintf(buf, cap, "[array of %" PRIu64 " %s]", kv->n, brisk_gguf_type_name(kv->elem_type));
    break;
  }
}

int64_t brisk_gguf_n_tensors(const brisk_gguf *g) { return g ? (int64_t)g->n_tensors : 0; }

const brisk_gguf_tensor *brisk_gguf_tensor_at(const brisk_gguf *g, int64_t i) {
  return g && i >= 0 && (uint64_t)i < g->n_tensors ? &g->tensors[i] : NULL;
}

const brisk_gguf_tensor *brisk_gguf_find_tensor(const brisk_gguf *g, const char *name) {
  if (!g || !name) return NULL;
  int64_t i = brisk_gguf_index_find(&g->tensor_index, name, brisk_gguf_name_hash(name),
                                    brisk_gguf_tensor_name, g);
  return i < 0 ? NULL : &g->tensors[i];
}
