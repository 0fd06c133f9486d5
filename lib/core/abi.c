/* The struct_size rule (see abi.h). */
#include "core/abi.h"

#include "core/error.h"

#include <string.h>

/* The caller's struct_size, read without assuming src is aligned beyond 4. */
static uint32_t struct_size_of(const void *p) {
  uint32_t s;
  memcpy(&s, p, sizeof s);
  return s;
}

/* Refuses sizes no header can have declared: too small to hold struct_size,
 * absurdly large, or ending inside one of the fields this library knows. */
static brisk_status check_size(const brisk_abi_layout *l, uint32_t s) {
  if (s < sizeof(uint32_t) || s > BRISK_ABI_MAX_STRUCT_SIZE)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s.struct_size %u is invalid (set it to sizeof(%s), e.g. with its "
                       "_init function)",
                       l->name, s, l->name);
  for (size_t i = 0; i < l->n_fields; i++) {
    const brisk_abi_field *f = &l->fields[i];
    if (s > f->offset && s < (uint32_t)f->offset + f->size)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "%s.struct_size %u ends inside field %s (bytes [%u, %u)): no "
                         "version of brisk.h declares that size",
                         l->name, s, f->name, f->offset, f->offset + f->size);
  }
  /* Below this library's size, an older header's sizeof is where one of
   * its fields ends, or that rounded up to the struct's alignment then (2, 4
   * or 8): a size in padding (sizeof - 1, say) is none of them. */
  if (s < l->size) {
    for (size_t i = 0; i < l->n_fields; i++) {
      uint32_t end = (uint32_t)l->fields[i].offset + l->fields[i].size;
      for (uint32_t a = 1; a <= 8; a *= 2)
        if (s == (end + a - 1) / a * a) return BRISK_OK;
    }
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s.struct_size %u ends in padding: no version of brisk.h declares that "
                       "size",
                       l->name, s);
  }
  return BRISK_OK;
}

brisk_status brisk_abi_read(const brisk_abi_layout *l, const void *src, void *dst) {
  uint32_t s = struct_size_of(src);
  brisk_status st = check_size(l, s);
  if (st) return st;
  const unsigned char *p = src;
  for (size_t i = l->size; i < s; i++)
    if (p[i])
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "%s.struct_size %u is larger than this library's %zu bytes and byte "
                         "%zu is not zero: the caller sets a field this version of brisk does "
                         "not have",
                         l->name, s, l->size, i);
  size_t n = s < l->size ? s : l->size;
  memcpy((unsigned char *)dst + sizeof(uint32_t), p + sizeof(uint32_t), n - sizeof(uint32_t));
  uint32_t own = (uint32_t)l->size;
  memcpy(dst, &own, sizeof own);
  return BRISK_OK;
}

brisk_status brisk_abi_check_out(const brisk_abi_layout *l, const void *dst) {
  return check_size(l, struct_size_of(dst));
}

brisk_status brisk_abi_write(const brisk_abi_layout *l, void *dst, const void *src) {
  uint32_t s = struct_size_of(dst);
  brisk_status st = check_size(l, s);
  if (st) return st;
  uint32_t n = s < l->size ? s : (uint32_t)l->size;
  memcpy((unsigned char *)dst + sizeof(uint32_t), (const unsigned char *)src + sizeof(uint32_t),
         n - sizeof(uint32_t));
  memcpy(dst, &n, sizeof n);
  return BRISK_OK;
}
