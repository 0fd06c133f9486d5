/* Finding and loading the CUDA plugin (libbrisk-cuda.so) on first use.
 *
 * Search order: core/dso.h's (brisk_set_plugin_dir, $BRISK_PLUGIN_DIR, next
 * to libbrisk, the install's library directory). The first file that
 * exists is loaded; if it cannot be (a missing CUDA library, another
 * build's plugin) that is the answer: a broken plugin is not silently
 * skipped. Every failure is remembered as one
 * message, returned with BRISK_E_NO_DEVICE on each later use. */
#include "backend/plugin.h"

#include "brisk_config.h"
#include "core/error.h"
#include "core/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PLUGIN_FILE "libbrisk-cuda.so"
#define REASON_CAP 2048

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool looked; /* the search ran (once) */
static void *handle;
static brisk_plugin_api api; /* valid when loaded */
static bool loaded;
static char reason[REASON_CAP]; /* why not, when !loaded */

_Static_assert(BRISK_PLUGIN_ABI == BRISK_PLUGIN_HOST_ABI, "one host table for every plugin");

brisk_status brisk_plugin_set_dir(const char *dir) { return brisk_dso_set_dir(dir); }

/* Loads the plugin at path, or says in reason why not. */
static void load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(reason, REASON_CAP, "the CUDA plugin %s cannot be loaded: %.800s", path, dlerror());
    return;
  }
  brisk_plugin_entry_fn entry = (brisk_plugin_entry_fn)(uintptr_t)dlsym(h, BRISK_PLUGIN_ENTRY);
  brisk_plugin_api a;
  memset(&a, 0, sizeof a);
  if (!entry) {
    snprintf(reason, REASON_CAP, "%s is not a brisk plugin (no %s)", path, BRISK_PLUGIN_ENTRY);
  } else if (entry(brisk_dso_host(), &a) != BRISK_OK) {
    snprintf(reason, REASON_CAP, "the CUDA plugin %s failed to start: %.800s", path,
             brisk_last_error());
  } else if (a.abi != BRISK_PLUGIN_ABI || !a.version ||
             strcmp(a.version, BRISK_VERSION_STRING) != 0) {
    snprintf(reason, REASON_CAP,
             "the CUDA plugin %s is from another brisk build; this library is %s (plugin ABI %d)",
             path, BRISK_VERSION_STRING, BRISK_PLUGIN_ABI);
  } else {
    handle = h;
    api = a;
    loaded = true;
    return;
  }
  dlclose(h);
}

static void search(void) {
  char path[1024], where[REASON_CAP] = "";
  if (brisk_dso_find(PLUGIN_FILE, path, sizeof path, where, sizeof where))
    load(path);
  else
    snprintf(reason, REASON_CAP,
             "no CUDA plugin (" PLUGIN_FILE ") was found; looked at: %.1800s(a build without CUDA "
             "has no plugin)",
             where);
}

static bool ensure_loaded(void) {
  pthread_mutex_lock(&lock);
  if (!looked) {
    looked = true;
    search();
    if (loaded)
      BRISK_DEBUG("loaded the CUDA plugin (%s)", api.provider.kind_name);
    else
      BRISK_DEBUG("%s", reason);
  }
  bool ok = loaded;
  pthread_mutex_unlock(&lock);
  return ok;
}

/* ---- the proxy provider ------------------------------------------------------ */

static brisk_status proxy_count(const brisk_device_provider *p, int32_t *n) {
  (void)p;
  *n = 0;
  if (!ensure_loaded()) return brisk_error(BRISK_E_NO_DEVICE, "%s", reason);
  return api.provider.count(&api.provider, n);
}

static brisk_status proxy_info(const brisk_device_provider *p, int32_t index,
                               brisk_device_props *out) {
  (void)p;
  if (!ensure_loaded()) return brisk_error(BRISK_E_NO_DEVICE, "%s", reason);
  return api.provider.info(&api.provider, index, out);
}

static brisk_status proxy_create(const brisk_device_provider *p, int32_t index,
                                 brisk_threadpool *pool, brisk_backend **out) {
  (void)p;
  if (!ensure_loaded()) return brisk_error(BRISK_E_NO_DEVICE, "%s", reason);
  return api.provider.create(&api.provider, index, pool, out);
}

brisk_status brisk_plugin_nccl(const struct brisk_nccl_rt **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_plugin_nccl: out is NULL");
  *out = NULL;
  if (!ensure_loaded()) return brisk_error(BRISK_E_NO_DEVICE, "%s", reason);
  if (!api.nccl)
    return brisk_error(BRISK_E_NO_DEVICE, "the CUDA plugin was built without NCCL support");
  *out = api.nccl;
  return BRISK_OK;
}

const brisk_device_provider brisk_cuda_provider = {
    .kind_name = "cuda",
    .kind = BRISK_DEVICE_CUDA,
    .count = proxy_count,
    .info = proxy_info,
    .create = proxy_create,
};
