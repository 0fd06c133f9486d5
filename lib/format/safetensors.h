/* safetensors reader and writer.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]},
 *    ..., "__metadata__": {"key": "value", ...}}
 * (optionally padded with spaces), then the data section; offsets count from
 * its start. The file is untrusted: opening validates the header length, the
 * JSON, every entry's fields and types, each tensor's extent against its
 * shape and dtype (overflow-checked) and the data section, overlaps, and
 * duplicate names, so accessors need no further checks. Depends on core and
 * format/json only. */
#ifndef BRISK_FORMAT_SAFETENSORS_H
#define BRISK_FORMAT_SAFETENSORS_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest rank accepted: 5-D tensors exist (video patch embeddings). */
#define BRISK_SAFETENSORS_MAX_DIMS 8
/* Largest header accepted, as in the reference implementation. */
#define BRISK_SAFETENSORS_MAX_HEADER 100000000u

typedef struct brisk_safetensors_tensor {
  const char *name; /* NUL-terminated UTF-8, unique in the file */
  uint32_t dtype;   /* BRISK_DTYPE_F32, _F16, _BF16 or _I32 */
  uint32_t n_dims;  /* 0 (a scalar) .. BRISK_SAFETENSORS_MAX_DIMS */
  /* Row-major as written by PyTorch: shape[0] is the outermost (slowest)
   * dimension, the reverse of GGUF's ne[]. Entries past n_dims are 1. */
  uint64_t shape[BRISK_SAFETENSORS_MAX_DIMS];
  uint64_t n_elements; /* product of shape; 1 for a scalar */
  uint64_t offset;     /* from the start of the data section */
  uint64_t n_bytes;    /* n_elements * element size */
  /* Points into the mapping (or the read buffer). Aligned to the element
   * size for files from brisk's writer and the reference library, but an
   * arbitrary file may misalign it: read through memcpy or check. */
  const void *data;
} brisk_safetensors_tensor;

typedef struct brisk_safetensors brisk_safetensors;

/* Opens and fully validates a file, mmap'ing it (falling back to reading it
 * into memory when mmap fails). Errors: BRISK_E_IO (cannot open/read),
 * BRISK_E_FORMAT (malformed; the message names the tensor or field and the
 * numbers), BRISK_E_UNSUPPORTED (a dtype other than F32/F16/BF16/I32, or more
 * than BRISK_SAFETENSORS_MAX_DIMS dimensions; the message names the dtype and
 * the tensor), BRISK_E_OUT_OF_MEMORY. *out is set only on BRISK_OK. */
brisk_status brisk_safetensors_open(const char *path, brisk_safetensors **out);
/* The same, reading the file into memory instead of mapping it. */
brisk_status brisk_safetensors_open_read(const char *path, brisk_safetensors **out);
/* As brisk_safetensors_open, for a model's weights: tensors of an integer
 * dtype other than I32 (I8, I16, I64, U8..U64, BOOL: buffers such as BERT's
 * position_ids that transformers saves with the weights) are left out of
 * the listing instead of failing the open; I32 tensors (GPTQ / AWQ packed
 * weights) are listed. */
brisk_status brisk_safetensors_open_model(const char *path, brisk_safetensors **out);
/* The same over a caller-owned buffer that must outlive the handle. */
brisk_status brisk_safetensors_open_memory(const void *data, size_t size, brisk_safetensors **out);
/* NULL is a no-op. Pointers obtained from the handle become invalid. */
void brisk_safetensors_close(brisk_safetensors *st);

uint64_t brisk_safetensors_file_size(const brisk_safetensors *st);
bool brisk_safetensors_is_mapped(const brisk_safetensors *st);

/* Tensors in header order. The handle is immutable after open: these and
 * the metadata accessors may be called concurrently. */
size_t brisk_safetensors_n_tensors(const brisk_safetensors *st);
/* NULL if i is out of range. */
const brisk_safetensors_tensor *brisk_safetensors_tensor_at(const brisk_safetensors *st, size_t i);
/* Binary search by name; NULL if absent. */
const brisk_safetensors_tensor *brisk_safetensors_find(const brisk_safetensors *st,
                                                       const char *name);

/* The "__metadata__" string map, in header order. */
size_t brisk_safetensors_n_metadata(const brisk_safetensors *st);
/* Key and value of entry i; false if i is out of range. */
bool brisk_safetensors_metadata_at(const brisk_safetensors *st, size_t i, const char **key,
                                   const char **value);
/* The value for key, or NULL. */
const char *brisk_safetensors_metadata(const brisk_safetensors *st, const char *key);

/* The dtype's name in files ("F32", "F16", "BF16", "I32"), or NULL for a dtype
 * safetensors support here does not cover. */
const char *brisk_safetensors_dtype_name(uint32_t dtype);

/* Writer: collects tensors and metadata, then writes the file. The header is
 * padded with spaces to a multiple of 8 bytes and tensors are laid out
 * widest element first, so each tensor's data is aligned to its element size
 * in the file; the header lists tensors in the order they were added. */
typedef struct brisk_safetensors_writer brisk_safetensors_writer;
brisk_status brisk_safetensors_writer_create(brisk_safetensors_writer **out);
void brisk_safetensors_writer_free(brisk_safetensors_writer *w);
/* Adds or replaces a "__metadata__" entry; key and value must be valid
 * UTF-8 (BRISK_E_INVALID_ARGUMENT otherwise). Both are copied. */
brisk_status brisk_safetensors_writer_set_metadata(brisk_safetensors_writer *w, const char *key,
                                                   const char *value);
/* Adds a tensor: dtype F32/F16/BF16/I32, n_dims 0..MAX_DIMS, shape outermost
 * first, n_bytes must equal the size the shape implies. The data is copied.
 * BRISK_E_INVALID_ARGUMENT for a bad name (empty, "__metadata__", not UTF-8,
 * or already added), dtype, shape or size. */
brisk_status brisk_safetensors_writer_add_tensor(brisk_safetensors_writer *w, const char *name,
                                                 uint32_t dtype, uint32_t n_dims,
                                                 const uint64_t *shape, const void *data,
                                                 uint64_t n_bytes);
/* The same without copying: `data` must stay valid until the writer is
 * written and freed (for converters streaming large weights). */
brisk_status brisk_safetensors_writer_add_tensor_ref(brisk_safetensors_writer *w, const char *name,
                                                     uint32_t dtype, uint32_t n_dims,
                                                     const uint64_t *shape, const void *data,
                                                     uint64_t n_bytes);
/* Writes the file (created or truncated; removed again on failure).
 * BRISK_E_IO with errno's text on failure. */
brisk_status brisk_safetensors_writer_write_file(brisk_safetensors_writer *w, const char *path);
/* Serializes into a brisk_malloc'ed buffer (free with brisk_free). */
brisk_status brisk_safetensors_writer_write_memory(brisk_safetensors_writer *w, void **data,
                                                   size_t *size);

#endif
