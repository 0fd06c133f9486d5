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
/* The world as a grid of pipeline stages of grid_t TP ranks each (NULL
 * until asked for): this process's stage group and the stage leaders. */
static brisk_comm *grid_tp, *grid_pp;
static int grid_t;
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
  } else if (entry(brisk_dso_host(), &a) != BRISK_OK || !a.world || !a.split) {
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

static void grid_free(void) {
  brisk_comm_free(grid_tp);
  brisk_comm_free(grid_pp);
  grid_tp = grid_pp = NULL;
  grid_t = 0;
}

brisk_status brisk_world_grid(int tp, brisk_comm **tp_group, brisk_comm **stages) {
  if (!world || tp < 1 || brisk_comm_size(world) % tp)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "MPI grid: %d TP ranks per stage", tp);
  if (grid_t != tp) {
    grid_free();
    const int p = brisk_comm_rank(world);
    brisk_status st;
    /* Both splits are made by every process, whatever the first's outcome. */
    brisk_status a = api.split(world, p / tp, p % tp, &grid_tp);
    brisk_status b = api.split(world, p % tp == 0 ? 0 : 1, p / tp, &grid_pp);
    if ((st = a ? a : b)) {
      grid_free();
      return st;
    }
    grid_t = tp;
  }
  *tp_group = grid_tp;
  *stages = grid_pp;
  return BRISK_OK;
}

void brisk_world_leave(void) {
  grid_free();
  brisk_comm_free(world);
  world = NULL;
}
