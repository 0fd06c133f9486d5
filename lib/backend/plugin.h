/* The interface between libbrisk and a device plugin (libbrisk-cuda.so).
 *
 * A plugin exports one function, BRISK_PLUGIN_ENTRY. libbrisk calls it once,
 * after dlopen, with the host table: the plugin reports errors, logs and
 * allocates host memory through it, so that brisk_last_error, the log
 * callback and the allocator hook cover the plugin too. The plugin fills the
 * API table with its device provider (backend/device.h). Plugin and library
 * are built from one tree: the ABI number and the version string must both
 * match, or the plugin is refused (BRISK_E_NO_DEVICE, naming both). */
#ifndef BRISK_BACKEND_PLUGIN_H
#define BRISK_BACKEND_PLUGIN_H

#include "backend/device.h"
#include "core/dso.h" /* the host table, brisk_plugin_host */

#include <stddef.h>
#include <stdint.h>

#define BRISK_PLUGIN_ABI 1 /* the API table's and the host table's */
#define BRISK_PLUGIN_ENTRY "brisk_plugin_entry_v1"

struct brisk_nccl_rt; /* parallel/comm_nccl.h */

typedef struct brisk_plugin_api {
  uint32_t abi;
  const char *version; /* the brisk version the plugin was built from */
  brisk_device_provider provider;
  /* NCCL and the device calls the NCCL communicators need
   * (parallel/comm_nccl.h); NULL when the plugin has none. */
  const struct brisk_nccl_rt *nccl;
} brisk_plugin_api;

typedef brisk_status (*brisk_plugin_entry_fn)(const brisk_plugin_host *host, brisk_plugin_api *api);

/* The CUDA provider of the registry: loads the plugin on first use and
 * forwards to it; without a usable plugin it has no devices and says why. */
extern const brisk_device_provider brisk_cuda_provider;

/* The plugin's NCCL table (loading the plugin if needed): BRISK_E_NO_DEVICE
 * with the reason when there is no plugin, or it has no NCCL. */
brisk_status brisk_plugin_nccl(const struct brisk_nccl_rt **out);

/* brisk_set_plugin_dir's state: BRISK_E_INVALID_STATE once a plugin was looked for. */
brisk_status brisk_plugin_set_dir(const char *dir);

#endif
