/* brisk's plugins: files built from this tree that libbrisk opens with
 * dlopen on first use, so that libbrisk itself links neither the CUDA
 * runtime (libbrisk-cuda.so, backend/plugin.h) nor MPI (libbrisk-mpi.so,
 * parallel/mpi_plugin.h).
 *
 * Where a plugin is looked for, in order: the directory from
 * brisk_set_plugin_dir, then $BRISK_PLUGIN_DIR, then the directory of the
 * file that holds this code (libbrisk.so, or a program linking brisk
 * statically; dladdr) and its ../lib, then the install's library
 * directory. The first file that exists is the answer: one that cannot be
 * loaded is an error, not silently skipped.
 *
 * The host table is what a plugin calls back into: errors, logs and host
 * memory go through libbrisk, so brisk_last_error, the log callback and the
 * allocator hook cover the plugin's code too (core/plugin_shim.c on the
 * plugin's side). */
#ifndef BRISK_CORE_DSO_H
#define BRISK_CORE_DSO_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRISK_PLUGIN_HOST_ABI 1

typedef struct brisk_plugin_host {
  uint32_t abi; /* BRISK_PLUGIN_HOST_ABI */
  /* Sets the calling thread's brisk_last_error and returns st. */
  brisk_status (*error)(brisk_status st, const char *message);
  void (*log)(brisk_log_level level, const char *message);
  /* Host memory through the allocator hook and its accounting. */
  void *(*malloc)(size_t bytes);
  void *(*calloc)(size_t n, size_t size);
  void (*free)(void *p);
} brisk_plugin_host;

/* libbrisk's host table (static storage). */
const brisk_plugin_host *brisk_dso_host(void);

/* brisk_set_plugin_dir: the directory to look in first (copied; NULL: the
 * default search). BRISK_E_INVALID_STATE once any plugin was looked for.
 * Thread-safe. */
brisk_status brisk_dso_set_dir(const char *dir);

/* Looks for `file` in the order above: true with its path in path[cap]
 * when one exists; false otherwise, with where it looked appended to
 * where[where_cap] ("DIR/FILE: absent; " each). Thread-safe. */
bool brisk_dso_find(const char *file, char *path, size_t cap, char *where, size_t where_cap);

#endif
