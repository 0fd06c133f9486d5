/* The device registry: the built-in CPU provider, the CUDA plugin's proxy,
 * and providers registered later (tests); device names parsed against it. */
#include "backend/device.h"

#include "backend/cpu/ops/cpu_backend.h"
#include "backend/plugin.h"
#include "core/abi.h"
#include "core/cpu.h"
#include "core/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the CPU provider ---------------------------------------------------- */

static brisk_status cpu_count(const brisk_device_provider *p, int32_t *n) {
  (void)p;
  *n = 1;
  return BRISK_OK;
}

/* The processor's model name from /proc/cpuinfo, else "cpu". */
static void cpu_model_name(char *buf, size_t cap) {
  snprintf(buf, cap, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    const char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    snprintf(buf, cap, "%s", colon);
    buf[strcspn(buf, "\n")] = 0;
    break;
  }
  fclose(f);
}

static brisk_status cpu_info(const brisk_device_provider *p, int32_t index,
                             brisk_device_props *out) {
  (void)p;
  (void)index;
  out->kind = BRISK_DEVICE_CPU;
  out->index = 0;
  snprintf(out->id, sizeof out->id, "cpu");
  cpu_model_name(out->name, sizeof out->name);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  out->total_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  out->free_memory = brisk_memory_available();
  out->compute_major = out->compute_minor = 0;
  return BRISK_OK;
}

static brisk_status cpu_create(const brisk_device_provider *p, int32_t index,
                               brisk_threadpool *pool, brisk_backend **out) {
  (void)p;
  (void)index;
  return brisk_backend_cpu_create(pool, BRISK_CPU_ISA_AUTO, out);
}

static const brisk_device_provider cpu_provider = {
    .kind_name = "cpu",
    .kind = BRISK_DEVICE_CPU,
    .count = cpu_count,
    .info = cpu_info,
    .create = cpu_create,
};

/* ---- the registry -------------------------------------------------------- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const brisk_device_provider *providers[BRISK_MAX_PROVIDERS] = {&cpu_provider,
                                                                      &brisk_cuda_provider};
static int n_providers = 2;
/* NCCL tables of registered providers (tests' emulated devices), by slot. */
static const struct brisk_nccl_rt *nccl_of[BRISK_MAX_PROVIDERS];

brisk_status brisk_device_register(const brisk_device_provider *p) {
  if (!p || !p->kind_name || !p->count || !p->info || !p->create)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "device provider: a field is NULL");
  brisk_status st = BRISK_OK;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < n_providers && !st; i++)
    if (strcmp(providers[i]->kind_name, p->kind_name) == 0)
      st = brisk_error(BRISK_E_INVALID_STATE, "device kind '%s' is registered already",
                       p->kind_name);
  if (!st && n_providers == BRISK_MAX_PROVIDERS)
    st = brisk_error(BRISK_E_INVALID_STATE, "device registry is full (%d kinds)",
                     BRISK_MAX_PROVIDERS);
  if (!st) providers[n_providers++] = p;
  pthread_mutex_unlock(&reg_lock);
  return st;
}

static const brisk_device_provider *find_provider(const char *kind, size_t len) {
  const brisk_device_provider *found = NULL;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < n_providers && !found; i++)
    if (strlen(providers[i]->kind_name) == len && strncmp(providers[i]->kind_name, kind, len) == 0)
      found = providers[i];
  pthread_mutex_unlock(&reg_lock);
  return found;
}

brisk_device_ref brisk_device_cpu(void) { return (brisk_device_ref){&cpu_provider, 0}; }

bool brisk_device_is_cpu(const brisk_device_ref *d) { return d->provider == &cpu_provider; }

void brisk_device_name(const brisk_device_ref *d, char *buf, size_t cap) {
  if (brisk_device_is_cpu(d))
    snprintf(buf, cap, "cpu");
  else
    snprintf(buf, cap, "%s:%d", d->provider->kind_name, (int)d->index);
}

brisk_status brisk_device_parse(const char *name, brisk_device_ref *out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "device: out is NULL");
  if (!name || !*name) {
    *out = brisk_device_cpu();
    return BRISK_OK;
  }
  const char *colon = strchr(name, ':');
  size_t kind_len = colon ? (size_t)(colon - name) : strlen(name);
  long index = 0;
  if (colon) {
    char *end = NULL;
    errno = 0;
    index = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end || errno || index > INT32_MAX)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "device '%s': the index after ':' must be a number >= 0 (\"cuda:0\")",
                         name);
  }
  const brisk_device_provider *p = find_provider(name, kind_len);
  if (!p)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "device '%s' is not a device name: use \"cpu\" or \"cuda:N\"", name);
  if (p == &cpu_provider && index != 0)
    return brisk_error(BRISK_E_NO_DEVICE, "device '%s': the CPU is device \"cpu\" (index 0)", name);
  int32_t n = 0;
  brisk_status st = p->count(p, &n);
  if (st) return st;
  if (index >= n)
    return brisk_error(BRISK_E_NO_DEVICE, "device '%s': there %s %d %s device%s (0..%d)", name,
                       n == 1 ? "is" : "are", (int)n, p->kind_name, n == 1 ? "" : "s", (int)n - 1);
  *out = (brisk_device_ref){p, (int32_t)index};
  return BRISK_OK;
}

brisk_status brisk_device_backend_create(const brisk_device_ref *d, brisk_threadpool *pool,
                                         brisk_backend **out) {
  if (!d || !d->provider || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "device backend: NULL argument");
  return d->provider->create(d->provider, d->index, pool, out);
}

brisk_status brisk_device_set_nccl(const brisk_device_provider *p, const struct brisk_nccl_rt *rt) {
  brisk_status st = brisk_error(BRISK_E_INVALID_ARGUMENT, "device NCCL: provider not registered");
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < n_providers; i++)
    if (providers[i] == p && p != &brisk_cuda_provider && p != &cpu_provider) {
      nccl_of[i] = rt;
      st = BRISK_OK;
    }
  pthread_mutex_unlock(&reg_lock);
  return st;
}

brisk_status brisk_device_nccl(const brisk_device_ref *d, const struct brisk_nccl_rt **out) {
  if (!d || !d->provider || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "device NCCL: NULL argument");
  if (d->provider == &brisk_cuda_provider) return brisk_plugin_nccl(out);
  const struct brisk_nccl_rt *rt = NULL;
  pthread_mutex_lock(&reg_lock);
  for (int i = 0; i < n_providers; i++)
    if (providers[i] == d->provider) rt = nccl_of[i];
  pthread_mutex_unlock(&reg_lock);
  if (!rt)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s devices have no NCCL communicator",
                       d->provider->kind_name);
  *out = rt;
  return BRISK_OK;
}

/* ---- the public calls ----------------------------------------------------- */

/* Device i of the public numbering: the providers' devices in registry order. */
static brisk_status nth_device(int32_t i, brisk_device_ref *out) {
  int32_t base = 0;
  pthread_mutex_lock(&reg_lock);
  int np = n_providers;
  const brisk_device_provider *ps[BRISK_MAX_PROVIDERS];
  memcpy(ps, providers, sizeof ps);
  pthread_mutex_unlock(&reg_lock);
  for (int k = 0; k < np; k++) {
    int32_t n = 0;
    if (ps[k]->count(ps[k], &n)) n = 0; /* no devices of this kind */
    if (i >= 0 && i < base + n) {
      *out = (brisk_device_ref){ps[k], i - base};
      return BRISK_OK;
    }
    base += n;
  }
  *out = (brisk_device_ref){NULL, base};
  return BRISK_E_NOT_FOUND;
}

BRISK_API int32_t brisk_device_count(void) {
  brisk_device_ref end;
  (void)nth_device(-1, &end);
  return end.index;
}

BRISK_API brisk_status brisk_device_info(int32_t i, brisk_device_props *props) {
  if (!props) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_device_info: props is NULL");
  brisk_status st = brisk_abi_check_out(&brisk_abi_device_props, props);
  if (st) return st;
  brisk_device_ref d;
  if (nth_device(i, &d))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_device_info: device %d is outside [0, %d)",
                       (int)i, (int)d.index);
  brisk_device_props p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  if ((st = d.provider->info(d.provider, d.index, &p))) return st;
  return brisk_abi_write(&brisk_abi_device_props, props, &p);
}

BRISK_API brisk_status brisk_device_check(const char *device) {
  brisk_device_ref d;
  if (!device) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_device_check: device is NULL");
  return brisk_device_parse(device, &d);
}

BRISK_API brisk_status brisk_set_plugin_dir(const char *dir) { return brisk_plugin_set_dir(dir); }
