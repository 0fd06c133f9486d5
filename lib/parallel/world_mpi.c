/* The MPI world of the process (parallel/world.h), over comm_mpi.c. */
#include "parallel/world.h"

#include "parallel/comm_mpi.h"

static brisk_comm *world;

brisk_status brisk_world_join(brisk_comm **out) {
  brisk_status st = world ? BRISK_OK : brisk_comm_mpi_world(&world);
  if (!st) *out = world;
  return st;
}

brisk_comm *brisk_world(void) { return world; }

void brisk_world_leave(void) {
  brisk_comm_free(world);
  world = NULL;
}
