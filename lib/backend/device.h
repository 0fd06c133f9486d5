/* Devices: where a model's weights live and a context's operations run.
 *
 * A device is named "<kind>[:<index>]" ("cpu", "cuda:0"; "cuda" is
 * "cuda:0"). Each kind has a provider: the CPU's is built in; CUDA's lives in
 * a plugin (libbrisk-cuda.so, backend/plugin.h) loaded on first use, so the
 * core library never links a GPU runtime. A provider enumerates its devices
 * and creates backends (backend.h tables) on them; a backend created for a
 * device index can use memory allocated by any other backend of the same
 * device, which is how contexts use the weights their model placed.
 *
 * Providers are registered once and never removed; the registry is safe to
 * use from several threads. */
#ifndef BRISK_BACKEND_DEVICE_H
#define BRISK_BACKEND_DEVICE_H

#include "backend/backend.h"
#include "core/threadpool.h"

#define BRISK_MAX_PROVIDERS 8

typedef struct brisk_device_provider brisk_device_provider;
struct brisk_device_provider {
  const char *kind_name;  /* "cpu", "cuda" */
  brisk_device_kind kind; /* what brisk_device_info reports */
  /* Number of devices. A provider that has none says why with a status
   * (BRISK_E_NO_DEVICE and a message naming the plugin, driver or device). */
  brisk_status (*count)(const brisk_device_provider *p, int32_t *n);
  /* Fills every field of *out but struct_size (0 <= index < count). */
  brisk_status (*info)(const brisk_device_provider *p, int32_t index, brisk_device_props *out);
  /* A backend on device `index`; pool is the context's thread pool (host
   * providers run on it; device providers may ignore it). */
  brisk_status (*create)(const brisk_device_provider *p, int32_t index, brisk_threadpool *pool,
                         brisk_backend **out);
  void *user;
};

/* A parsed device name. */
typedef struct brisk_device_ref {
  const brisk_device_provider *provider;
  int32_t index;
} brisk_device_ref;

/* Registers a provider for a kind name not registered yet (the CUDA plugin,
 * or a test's). BRISK_E_INVALID_STATE if the name is taken or the table is
 * full. */
brisk_status brisk_device_register(const brisk_device_provider *p);

/* Parses and checks a device name: NULL or "" is the CPU. Errors:
 * BRISK_E_INVALID_ARGUMENT (malformed name, unknown kind),
 * BRISK_E_NO_DEVICE (the kind's plugin, driver or device is missing, or the
 * index is past the devices there are), each with a message saying which. */
brisk_status brisk_device_parse(const char *name, brisk_device_ref *out);

/* The CPU device. */
brisk_device_ref brisk_device_cpu(void);

bool brisk_device_is_cpu(const brisk_device_ref *d);

/* "cpu", "cuda:1", ... into buf. */
void brisk_device_name(const brisk_device_ref *d, char *buf, size_t cap);

/* A backend on the device (see brisk_device_provider.create). */
brisk_status brisk_device_backend_create(const brisk_device_ref *d, brisk_threadpool *pool,
                                         brisk_backend **out);

/* NCCL for tensor parallelism over a kind's devices (parallel/comm_nccl.h):
 * the CUDA plugin's table (brisk_plugin_nccl), or the one a registered
 * provider was given (the test suite's emulated devices); the CPU and
 * kinds without one: BRISK_E_UNSUPPORTED with a message. */
struct brisk_nccl_rt;
brisk_status brisk_device_nccl(const brisk_device_ref *d, const struct brisk_nccl_rt **out);
brisk_status brisk_device_set_nccl(const brisk_device_provider *p, const struct brisk_nccl_rt *rt);

#endif
