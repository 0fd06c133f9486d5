/* A build without Open MPI (parallel/world.h): there is no world to join. */
#include "parallel/world.h"

#include "core/error.h"

brisk_status brisk_world_join(brisk_comm **out) {
  (void)out;
  return brisk_error(BRISK_E_UNSUPPORTED,
                     "this brisk was built without MPI (install libopenmpi-dev and rebuild)");
}

brisk_comm *brisk_world(void) { return NULL; }

void brisk_world_leave(void) {}
