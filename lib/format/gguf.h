/* GGUF (v2, v3) reader and writer. A model file is untrusted input: opening
 * validates every length, count, offset, alignment and tensor extent with
 * overflow-safe arithmetic before anything is used, so accessors below need
 * no further checks. Depends on core only. */
#ifndef BRISK_FORMAT_GGUF_H
#define BRISK_FORMAT_GGUF_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Metadata value types, numbered as in the file. */
typedef enum brisk_gguf_type {
  BRISK_GGUF_UINT8 = 0,
  BRISK_GGUF_INT8 = 1,
  BRISK_GGUF_UINT16 = 2,
  BRISK_GGUF_INT16 = 3,
  BRISK_GGUF_UINT32 = 4,
  BRISK_GGUF_INT32 = 5,
  BRISK_GGUF_FLOAT32 = 6,
  BRISK_GGUF_BOOL = 7,
  BRISK_GGUF_STRING = 8,
  BRISK_GGUF_ARRAY = 9,
  BRISK_GGUF_UINT64 = 10,
  BRISK_GGUF_INT64 = 11,
  BRISK_GGUF_FLOAT64 = 12,
} brisk_gguf_type;

/* A string inside the file (not NUL-terminated in the file; `ptr` below is
 * always NUL-terminated by the reader, and may contain embedded NULs, so use
 * len). */
typedef struct brisk_gguf_str {
  const char *ptr;
  uint64_t len;
} brisk_gguf_str;

#define BRISK_GGUF_MAX_DIMS 4

typedef struct brisk_gguf_tensor {
  const char *name;                 /* NUL-terminated, unique in the file */
  uint32_t n_dims;                  /* 1..4 */
  uint64_t ne[BRISK_GGUF_MAX_DIMS]; /* elements per dim, ne[0] fastest; unused dims 1 */
  uint32_t type;                    /* brisk_dtype id, known to the type table */
  uint64_t offset;                  /* from the start of the data section */
  uint64_t n_bytes;                 /* exact data size */
  const void *data;                 /* points into the mapping (or read buffer) */
} brisk_gguf_tensor;

typedef struct brisk_gguf brisk_gguf;

/* Opens and fully validates a file: mmap, falling back to read() into memory.
 * Errors: BRISK_E_IO (cannot open/read), BRISK_E_FORMAT (malformed; message
 * names the key or tensor and the numbers), BRISK_E_UNSUPPORTED (unknown
 * tensor type or version), BRISK_E_OUT_OF_MEMORY. */
brisk_status brisk_gguf_open(const char *path, brisk_gguf **out);
/* The same over a caller-owned buffer that must outlive the handle. */
brisk_status brisk_gguf_open_memory(const void *data, size_t size, brisk_gguf **out);
/* The same over a brisk_aligned_alloc'ed buffer the handle takes over on
 * success (and frees at close); on failure the caller still owns it. */
brisk_status brisk_gguf_open_owned(void *data, size_t size, brisk_gguf **out);
/* brisk_gguf_open with flags: BRISK_GGUF_OPEN_NO_MMAP forces the read() path
 * (the file is read into one brisk_aligned_alloc'ed buffer), for tests. */
#define BRISK_GGUF_OPEN_NO_MMAP 1u
brisk_status brisk_gguf_open_flags(const char *path, uint32_t flags, brisk_gguf **out);
void brisk_gguf_close(brisk_gguf *g); /* NULL is a no-op */

uint32_t brisk_gguf_version(const brisk_gguf *g);
uint32_t brisk_gguf_alignment(const brisk_gguf *g);
uint64_t brisk_gguf_file_size(const brisk_gguf *g);
bool brisk_gguf_is_mapped(const brisk_gguf *g); /* true if mmap, false if read */
/* Offset of the data section from the start of the file: the first multiple
 * of the alignment after the tensor infos. With no tensors it may lie past
 * the end of the file (writers need not pad a file without data). */
uint64_t brisk_gguf_data_offset(const brisk_gguf *g);
/* The file's bytes (mapping, read buffer, or the caller's buffer). */
const void *brisk_gguf_bytes(const brisk_gguf *g);
/* Lets the caller rewrite tensor bytes in [p, p + n) in place (the model
 * loader regroups some weights for the CPU kernels). A mapping is made
 * writable page by page: it is private, so written pages become the
 * process's own copies and the file never changes. A read buffer is already
 * writable. writable = false makes mapped pages read-only again. Errors:
 * BRISK_E_INVALID_ARGUMENT ([p, p + n) not inside the file's bytes),
 * BRISK_E_UNSUPPORTED (the caller's buffer from open_memory), BRISK_E_IO
 * (mprotect failed). */
brisk_status brisk_gguf_set_writable(brisk_gguf *g, const void *p, size_t n, bool writable);

/* Limits and rules the reader enforces (documented for writers and tools):
 * - versions 2 and 3 only (v1 and unknown versions: BRISK_E_UNSUPPORTED);
 * - general.alignment, when present, is a u32 power of two (default 32);
 * - keys and tensor names are non-empty, valid UTF-8 without control
 *   characters (U+0000..U+001F, U+007F: messages stay one line), and unique;
 *   string values may hold any bytes (vocabularies do);
 * - arrays of arrays are rejected as malformed (BRISK_E_FORMAT): no model
 *   file uses them and their size cannot be bounded cheaply;
 * - bool values (scalars and array elements) are 0 or 1;
 * - tensors have 1..4 dims, each >= 1, whose product fits in int64_t, a row
 *   length divisible by the type's block size, an offset that is a multiple
 *   of the alignment, and data inside the file; an unknown type id is
 *   BRISK_E_UNSUPPORTED. */
#define BRISK_GGUF_DEFAULT_ALIGNMENT 32u
/* Bytes of one scalar of `type`; 0 for STRING, ARRAY and unknown types. */
size_t brisk_gguf_type_size(brisk_gguf_type type);
/* "u8", "i32", "f32", "bool", "string", "array", ...; "unknown" otherwise. */
const char *brisk_gguf_type_name(brisk_gguf_type type);
/* A valid key or tensor name: UTF-8 as above and no control characters. */
bool brisk_gguf_name_valid(const char *s, size_t len);

/* A handle is immutable once open: any number of threads may read it at
 * once. Pointers it returns live until brisk_gguf_close.
 * Metadata: keys are indexed 0..n-1 in file order; an index out of range
 * gives NULL / (brisk_gguf_type)-1 / 0 below. */
int64_t brisk_gguf_n_kv(const brisk_gguf *g);
int64_t brisk_gguf_find_key(const brisk_gguf *g, const char *key); /* -1 if absent */
const char *brisk_gguf_key(const brisk_gguf *g, int64_t i);
brisk_gguf_type brisk_gguf_kv_type(const brisk_gguf *g, int64_t i);
/* For an array kv: element type and length (ARRAY-less kvs: UINT8 and 0). */
brisk_gguf_type brisk_gguf_kv_arr_type(const brisk_gguf *g, int64_t i);
uint64_t brisk_gguf_kv_arr_len(const brisk_gguf *g, int64_t i);
/* For a scalar kv: its raw little-endian value bytes (brisk_gguf_type_size
 * of them); for a string kv: the string. NULL / {NULL, 0} otherwise. */
const void *brisk_gguf_kv_scalar(const brisk_gguf *g, int64_t i);
brisk_gguf_str brisk_gguf_kv_str(const brisk_gguf *g, int64_t i);

/* Typed getters by key: BRISK_OK, BRISK_E_NOT_FOUND if absent, or
 * BRISK_E_FORMAT if the stored type does not fit (message names the key).
 * Integer getters accept any integer type whose value fits. */
brisk_status brisk_gguf_get_u32(const brisk_gguf *g, const char *key, uint32_t *out);
brisk_status brisk_gguf_get_i32(const brisk_gguf *g, const char *key, int32_t *out);
brisk_status brisk_gguf_get_u64(const brisk_gguf *g, const char *key, uint64_t *out);
brisk_status brisk_gguf_get_f32(const brisk_gguf *g, const char *key, float *out); /* f32 or f64 */
brisk_status brisk_gguf_get_bool(const brisk_gguf *g, const char *key, bool *out);
brisk_status brisk_gguf_get_str(const brisk_gguf *g, const char *key, brisk_gguf_str *out);
brisk_status brisk_gguf_get_i64(const brisk_gguf *g, const char *key, int64_t *out);
brisk_status brisk_gguf_get_f64(const brisk_gguf *g, const char *key, double *out); /* f32/f64 */
/* Exact type only: copies brisk_gguf_type_size(type) raw bytes to out. */
brisk_status brisk_gguf_get_scalar(const brisk_gguf *g, const char *key, brisk_gguf_type type,
                                   void *out);

/* Arrays: element type and length; numeric elements are contiguous
 * little-endian values at brisk_gguf_arr_data (unaligned: memcpy them);
 * string elements by index in O(1). Nested arrays are rejected at open. */
brisk_status brisk_gguf_get_arr(const brisk_gguf *g, const char *key, brisk_gguf_type *elem_type,
                                uint64_t *len);
const void *brisk_gguf_arr_data(const brisk_gguf *g, int64_t kv_index);
brisk_gguf_str brisk_gguf_arr_str(const brisk_gguf *g, int64_t kv_index, uint64_t j);

/* Scalar value of kv i formatted as text ("42", "true", a string, or
 * "[array of N type]") into buf; for `brisk info` and metadata lookup. */
void brisk_gguf_format_value(const brisk_gguf *g, int64_t i, char *buf, size_t cap);

/* Tensors in file order. */
int64_t brisk_gguf_n_tensors(const brisk_gguf *g);
const brisk_gguf_tensor *brisk_gguf_tensor_at(const brisk_gguf *g, int64_t i);
const brisk_gguf_tensor *brisk_gguf_find_tensor(const brisk_gguf *g, const char *name);

/* Writer: builds a file in memory and writes it at the end. Values and
 * tensor data are copied. Used by tests and by the quantize/convert tools.
 * Every setter validates like the reader (keys non-empty valid UTF-8 without
 * NUL, unique; tensors as above) and returns BRISK_E_INVALID_ARGUMENT with a
 * message otherwise, leaving the writer unchanged. Keys and tensors are
 * written in the order they were added. */
typedef struct brisk_gguf_writer brisk_gguf_writer;
/* version 2 or 3; alignment a power of two (0 means 32). An
 * alignment other than 32 is recorded as the first key, general.alignment,
 * which callers may then not set themselves. */
brisk_status brisk_gguf_writer_create(uint32_t version, uint32_t alignment,
                                      brisk_gguf_writer **out);
void brisk_gguf_writer_free(brisk_gguf_writer *w);
brisk_status brisk_gguf_writer_set_u32(brisk_gguf_writer *w, const char *key, uint32_t v);
brisk_status brisk_gguf_writer_set_i32(brisk_gguf_writer *w, const char *key, int32_t v);
brisk_status brisk_gguf_writer_set_u64(brisk_gguf_writer *w, const char *key, uint64_t v);
brisk_status brisk_gguf_writer_set_f32(brisk_gguf_writer *w, const char *key, float v);
brisk_status brisk_gguf_writer_set_bool(brisk_gguf_writer *w, const char *key, bool v);
brisk_status brisk_gguf_writer_set_str(brisk_gguf_writer *w, const char *key, const char *v);
/* Any scalar type given by its raw little-endian bytes (for round-trip tests). */
brisk_status brisk_gguf_writer_set_scalar(brisk_gguf_writer *w, const char *key,
                                          brisk_gguf_type type, const void *value);
/* Numeric array: n elements of elem_type, raw little-endian. */
brisk_status brisk_gguf_writer_set_arr(brisk_gguf_writer *w, const char *key,
                                       brisk_gguf_type elem_type, const void *data, uint64_t n);
brisk_status brisk_gguf_writer_set_arr_str(brisk_gguf_writer *w, const char *key,
                                           const char *const *strs, uint64_t n);
/* Strings given with their lengths (may hold NUL bytes or any bytes). */
brisk_status brisk_gguf_writer_set_strn(brisk_gguf_writer *w, const char *key, const char *v,
                                        uint64_t len);
brisk_status brisk_gguf_writer_set_arr_strn(brisk_gguf_writer *w, const char *key,
                                            const brisk_gguf_str *strs, uint64_t n);
/* Tensor data of n_bytes (must equal the size implied by type and ne). */
brisk_status brisk_gguf_writer_add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type,
                                          uint32_t n_dims, const uint64_t *ne, const void *data,
                                          uint64_t n_bytes);
brisk_status brisk_gguf_writer_write_file(brisk_gguf_writer *w, const char *path);
/* Serializes into a brisk_malloc'ed buffer (free with brisk_free). */
brisk_status brisk_gguf_writer_write_memory(brisk_gguf_writer *w, void **data, size_t *size);

#endif
