/* The struct_size rule of brisk.h, in one place: every public call that takes
 * a params struct reads it with brisk_abi_read, and every call that fills a
 * struct for the caller writes it with brisk_abi_write.
 *
 *  - A smaller struct_size (a caller built against an older header) is
 *    accepted: the fields it does not cover keep their defaults, or are not
 *    written.
 *  - A larger one (a newer header) is accepted when every byte this library
 *    does not know is zero (the newer fields are at their zero default);
 *    otherwise refused, since the caller asks for something this library
 *    cannot do.
 *  - A struct_size below 4, above BRISK_ABI_MAX_STRUCT_SIZE, or ending inside
 *    a field is not a size any header declared: refused.
 * Each struct's fields are listed in abi_layout.c, so that the check knows
 * where fields end; tests/core/test_abi.c checks those lists against the
 * header. */
#ifndef BRISK_CORE_ABI_H
#define BRISK_CORE_ABI_H

#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

/* Larger struct_size values are taken for garbage (an uninitialized struct),
 * not for a newer header: reading that far could fault. */
#define BRISK_ABI_MAX_STRUCT_SIZE 4096u

typedef struct brisk_abi_field {
  uint16_t offset, size;
  const char *name;
} brisk_abi_field;

typedef struct brisk_abi_layout {
  const char *name; /* the C type name, for messages */
  size_t size;      /* sizeof in this build */
  const brisk_abi_field *fields;
  size_t n_fields; /* in order of offset; fields[0] is struct_size */
} brisk_abi_layout;

#define BRISK_ABI_FIELD(type, field)                                                               \
  { offsetof(type, field), sizeof(((type *)0)->field), #field }

/* Every public struct that starts with struct_size (abi_layout.c). */
extern const brisk_abi_layout brisk_abi_allocator, brisk_abi_model_params, brisk_abi_tensor_info,
    brisk_abi_context_params, brisk_abi_kv_stats, brisk_abi_sampler_params,
    brisk_abi_stopper_params, brisk_abi_spec_params, brisk_abi_spec_stats, brisk_abi_engine_params,
    brisk_abi_request_params, brisk_abi_engine_step_info, brisk_abi_request_stats,
    brisk_abi_engine_counters, brisk_abi_engine_metrics, brisk_abi_device_props,
    brisk_abi_model_reader, brisk_abi_constraint_params, brisk_abi_memory_estimate,
    brisk_abi_embed_params, brisk_abi_embed_request_params;

/* All of the above, for tests. */
extern const brisk_abi_layout *const brisk_abi_layouts[];
extern const size_t brisk_abi_n_layouts;

/* Copies the caller's struct `src` (its first uint32_t is struct_size) over
 * `dst`, which holds the defaults and is layout->size bytes; dst's
 * struct_size is then layout->size. BRISK_E_INVALID_ARGUMENT with a message
 * naming the struct for a bad size or an unknown non-zero tail; dst is then
 * unchanged. `src` must not be NULL. */
brisk_status brisk_abi_read(const brisk_abi_layout *layout, const void *src, void *dst);

/* The size checks of brisk_abi_write alone, for calls that must refuse a bad
 * output struct before doing their work. */
brisk_status brisk_abi_check_out(const brisk_abi_layout *layout, const void *dst);

/* Writes `src` (a complete struct of layout->size bytes) into the caller's
 * struct `dst`, whose struct_size says how much of it exists: bytes past
 * struct_size (or past layout->size) are not touched, and dst's struct_size
 * becomes the number of bytes written, min(struct_size, layout->size).
 * BRISK_E_INVALID_ARGUMENT for a bad size (dst unchanged). */
brisk_status brisk_abi_write(const brisk_abi_layout *layout, void *dst, const void *src);

#endif
