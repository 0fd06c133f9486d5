/* The MPI world of the process (parallel/world.h), over the MPI plugin
 * (parallel/mpi_plugin.h), found and opened on the first join. */
#include "parallel/world.h"

#include "brisk_config.h"
#include "core/error.h"
#include "core/log.h"
#include "parallel/mpi_plugin.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define REASON_CAP 2048

static brisk_comm *world;
static bool looked;
static brisk_mpi_plugin_api api; /* valid when api.world is set */
static char reason[REASON_CAP];  /* why not, when it is not */

/* Opens the plugin at path, or says in reason why not. The handle is kept
 * for the process's life: MPI cannot be initialized twice anyway. */
static void load(const char *path) {
  /* RTLD_GLOBAL: Open MPI's own components, which it opens itself, resolve
   * symbols of libmpi and its libraries against the global scope. */
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(
        reason, REASON_CAP,
        "the MPI plugin %s cannot be loaded (is Open MPI installed? Debian: openmpi-bin): %.800s",
        path, dlerror());
    return;
  }
  brisk_mpi_plugin_entry_fn entry =
      (brisk_mpi_plugin_entry_fn)(uintptr_t)dlsym(h, BRISK_MPI_PLUGIN_ENTRY);
  brisk_mpi_plugin_api a;
  memset(&a, 0, sizeof a);
  if (!entry) {
    snprintf(reason, REASON_CAP, "%s is not brisk's MPI plugin (no %s)", path,
             BRISK_MPI_PLUGIN_ENTRY);
  } else if (entry(brisk_dso_host(), &a) != BRISK_OK || !a.world) {
    snprintf(reason, REASON_CAP, "the MPI plugin %s failed to start: %.800s", path,
             brisk_last_error());
  } else if (a.abi != BRISK_MPI_PLUGIN_ABI || !a.version ||
             strcmp(a.version, BRISK_VERSION_STRING) != 0) {
    snprintf(reason, REASON_CAP,
             "the MPI plugin %s is from another brisk build; this library is %s (MPI plugin ABI "
             "%d)",
             path, BRISK_VERSION_STRING, BRISK_MPI_PLUGIN_ABI);
  } else {
    api = a;
    BRISK_DEBUG("loaded the MPI plugin %s", path);
    return;
  }
  dlclose(h);
}

static void search(void) {
  char path[1024], where[REASON_CAP] = "";
  if (brisk_dso_find(BRISK_MPI_PLUGIN_FILE, path, sizeof path, where, sizeof where))
    load(path);
  else
    snprintf(reason, REASON_CAP,
             "no MPI plugin (" BRISK_MPI_PLUGIN_FILE
             ") was found; looked at: %.1800s(a build without "
             "Open MPI has none: install libopenmpi-dev and rebuild)",
             where);
}

brisk_status brisk_world_join(brisk_comm **out) {
  if (!world) {
    if (!looked) {
      looked = true;
      search();
    }
    if (!api.world) return brisk_error(BRISK_E_UNSUPPORTED, "%s", reason);
    brisk_status st = api.world(&world);
    if (st) return st;
  }
  *out = world;
  return BRISK_OK;
}

brisk_comm *brisk_world(void) { return world; }

void brisk_world_leave(void) {
  brisk_comm_free(world);
  world = NULL;
}
