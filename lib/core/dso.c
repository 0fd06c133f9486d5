/* Finding plugins and the host table they call back into (core/dso.h). */
#include "core/dso.h"

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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool searched; /* a plugin was looked for: the directory is fixed */
static char *user_dir;

brisk_status brisk_dso_set_dir(const char *dir) {
  brisk_status st = BRISK_OK;
  pthread_mutex_lock(&lock);
  if (searched) {
    st = brisk_error(BRISK_E_INVALID_STATE,
                     "brisk_set_plugin_dir: plugins were looked for already; call it before the "
                     "first device lookup, model load or brisk_mpi_world");
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

/* ---- the host table ---------------------------------------------------------- */

static brisk_status host_error(brisk_status st, const char *message) {
  return brisk_error(st, "%s", message ? message : "(no message)");
}
static void host_log(brisk_log_level level, const char *message) {
  brisk_log(level, "%s", message);
}
static void *host_malloc(size_t n) { return brisk_malloc(n); }
static void *host_calloc(size_t n, size_t size) { return brisk_calloc(n, size); }
static void host_free(void *p) { brisk_free(p); }

static const brisk_plugin_host host_table = {BRISK_PLUGIN_HOST_ABI, host_error,  host_log,
                                             host_malloc,           host_calloc, host_free};

const brisk_plugin_host *brisk_dso_host(void) { return &host_table; }

/* ---- the search ---------------------------------------------------------------- */

static void append(char *where, size_t cap, const char *path) {
  size_t len = strlen(where);
  if (len + 1 < cap) snprintf(where + len, cap - len, "%s: absent; ", path);
}

/* dir/file into path when it exists. */
static bool try_dir(const char *dir, const char *file, char *path, size_t cap, char *where,
                    size_t where_cap) {
  if (!dir || !*dir || snprintf(path, cap, "%s/%s", dir, file) >= (int)cap) return false;
  struct stat sb;
  if (stat(path, &sb) == 0) return true;
  append(where, where_cap, path);
  return false;
}

/* Directory of the file this code was loaded from, into buf. */
static bool own_dir(char *buf, size_t cap) {
  Dl_info info;
  if (!dladdr((void *)(uintptr_t)&brisk_dso_find, &info) || !info.dli_fname) return false;
  snprintf(buf, cap, "%s", info.dli_fname);
  char *slash = strrchr(buf, '/');
  if (!slash) return false;
  *slash = 0;
  return true;
}

bool brisk_dso_find(const char *file, char *path, size_t cap, char *where, size_t where_cap) {
  pthread_mutex_lock(&lock);
  searched = true;
  char dir[4096] = "";
  if (user_dir) snprintf(dir, sizeof dir, "%s", user_dir);
  pthread_mutex_unlock(&lock);
  char here[4096], beside[4096 + 8];
  bool have_here = own_dir(here, sizeof here);
  /* A program in PREFIX/bin linking brisk statically finds PREFIX/lib. */
  if (have_here) snprintf(beside, sizeof beside, "%s/../lib", here);
  return try_dir(dir, file, path, cap, where, where_cap) ||
         try_dir(getenv("BRISK_PLUGIN_DIR"), file, path, cap, where, where_cap) ||
         (have_here && try_dir(here, file, path, cap, where, where_cap)) ||
         (have_here && try_dir(beside, file, path, cap, where, where_cap)) ||
         try_dir(BRISK_PLUGIN_LIBDIR, file, path, cap, where, where_cap);
}
