/* Finding and loading the CUDA plugin (libbrisk-cuda.so) on first use.
 *
 * Search order: the directory from brisk_set_plugin_dir, then
 * $BRISK_PLUGIN_DIR, then the directory of the file that holds this code
 * (libbrisk.so, or a program linking brisk statically) and its ../lib, then
 * the install's library directory. The first file that exists is loaded; if it cannot be
 * (a missing CUDA library, another build's plugin) that is the answer: a
 * broken plugin is not silently skipped. Every failure is remembered as one
 * message, returned with BRISK_E_NO_DEVICE on each later use. */
#include "backend/plugin.h"

#include "brisk_config.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PLUGIN_FILE "libbrisk-cuda.so"
#define REASON_CAP 2048

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool looked; /* the search ran (once) */
static char *user_dir;
static void *handle;
static brisk_plugin_api api; /* valid when loaded */
static bool loaded;
static char reason[REASON_CAP]; /* why not, when !loaded */

brisk_status brisk_plugin_set_dir(const char *dir) {
  brisk_status st = BRISK_OK;
  pthread_mutex_lock(&lock);
  if (looked) {
    st = brisk_error(BRISK_E_INVALID_STATE,
                     "brisk_set_plugin_dir: plugins were looked for already; call it before the "
                     "first device lookup or model load");
  } else {
    char *copy = dir ? brisk_strdup(dir) : NULL;
    if (dir && !copy) {
      st = brisk_error_oom();
    } else {
      brisk_free(user_dir);
      user_dir = copy;
    }
  }
  pthread_mutex_unlock(&lock);
  return st;
}

/* ---- the host table the plugin calls back into ---------------------------- */

static brisk_status host_error(brisk_status st, const char *message) {
  return brisk_error(st, "%s", message ? message : "(no message)");
}
static void host_log(brisk_log_level level, const char *message) {
  brisk_log(level, "%s", message);
}
static void *host_malloc(size_t n) { return brisk_malloc(n); }
static void *host_calloc(size_t n, size_t size) { return brisk_calloc(n, size); }
static void host_free(void *p) { brisk_free(p); }

static const brisk_plugin_host host_table = {BRISK_PLUGIN_ABI, host_error,  host_log,
                                             host_malloc,      host_calloc, host_free};

/* ---- the search ------------------------------------------------------------ */

static void append(size_t *len, const char *fmt, const char *a, const char *b) {
  if (*len >= REASON_CAP - 1) return;
  int n = snprintf(reason + *len, REASON_CAP - *len, fmt, a, b);
  if (n > 0) *len += (size_t)n < REASON_CAP - *len ? (size_t)n : REASON_CAP - 1 - *len;
}

/* Tries dir/PLUGIN_FILE: returns true when a file was there (loaded or not). */
static bool try_dir(const char *dir, size_t *len) {
  char path[4096];
  if (!dir || !*dir || snprintf(path, sizeof path, "%s/%s", dir, PLUGIN_FILE) >= (int)sizeof path)
    return false;
  struct stat sb;
  if (stat(path, &sb) != 0) {
    append(len, "%s%s: absent; ", path, "");
    return false;
  }
  *len = 0;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    append(len, "the CUDA plugin %s cannot be loaded: %s", path, dlerror());
    return true;
  }
  brisk_plugin_entry_fn entry = (brisk_plugin_entry_fn)(uintptr_t)dlsym(h, BRISK_PLUGIN_ENTRY);
  brisk_plugin_api a;
  memset(&a, 0, sizeof a);
  if (!entry) {
    append(len, "%s is not a brisk plugin (no %s)", path, BRISK_PLUGIN_ENTRY);
  } else if (entry(&host_table, &a) != BRISK_OK) {
    append(len, "the CUDA plugin %s failed to start: %s", path, brisk_last_error());
  } else if (a.abi != BRISK_PLUGIN_ABI || !a.version ||
             strcmp(a.version, BRISK_VERSION_STRING) != 0) {
    char want[64];
    snprintf(want, sizeof want, "%s (plugin ABI %d)", BRISK_VERSION_STRING, BRISK_PLUGIN_ABI);
    append(len, "the CUDA plugin %s is from another brisk build; this library is %s", path, want);
  } else {
    handle = h;
    api = a;
    loaded = true;
    return true;
  }
  dlclose(h);
  return true;
}

/* Directory of the file this code was loaded from, into buf. */
static bool own_dir(char *buf, size_t cap) {
  Dl_info info;
  if (!dladdr((void *)(uintptr_t)&brisk_plugin_set_dir, &info) || !info.dli_fname) return false;
  snprintf(buf, cap, "%s", info.dli_fname);
  char *slash = strrchr(buf, '/');
  if (!slash) return false;
  *slash = 0;
  return true;
}

static void search(void) {
  size_t len = 0;
  append(&len, "%s%s", "no CUDA plugin (" PLUGIN_FILE ") was found; looked at: ", "");
  char here[4096];
  const char *env = getenv("BRISK_PLUGIN_DIR");
  char beside[4096 + 8];
  bool have_here = own_dir(here, sizeof here);
  /* A program in PREFIX/bin linking brisk statically finds PREFIX/lib. */
  if (have_here) snprintf(beside, sizeof beside, "%s/../lib", here);
  if (try_dir(user_dir, &len) || try_dir(env, &len) || (have_here && try_dir(here, &len)) ||
      (have_here && try_dir(beside, &len)) || try_dir(BRISK_PLUGIN_LIBDIR, &len))
    return;
  append(&len, "%s%s", "(a build without CUDA has no plugin)", "");
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
