/* This process's MPI world (multi-process ranks, docs/parallelism.md):
 * joined once by brisk_mpi_world (lib/context/worker.c), shared by every
 * context of the process. The communicator comes from the MPI plugin
 * (parallel/mpi_plugin.h), opened on the first join; without it (a build
 * without Open MPI, a machine without its libraries) joining fails with
 * BRISK_E_UNSUPPORTED saying what was looked for. Not thread-safe: join and
 * leave from the thread that owns the process's ranks. */
#ifndef BRISK_PARALLEL_WORLD_H
#define BRISK_PARALLEL_WORLD_H

#include "parallel/comm.h"

/* Joins (initializing MPI if the program has not) or returns the joined
 * world's handle, owned here. */
brisk_status brisk_world_join(brisk_comm **out);
/* The joined world, or NULL. */
brisk_comm *brisk_world(void);
/* The world as pipeline stages of `tp` TP ranks each, process p being TP
 * rank p % tp of stage p / tp: *tp_group is this process's stage's group,
 * *stages the stage leaders (TP rank 0 of each stage; on other processes a
 * group of the non-leaders, not to be used). Collective over the world the
 * first time for a given tp; the handles are the world's. */
brisk_status brisk_world_grid(int tp, brisk_comm **tp_group, brisk_comm **stages);
/* Frees the handle (and the grid's, and finalizes MPI when the join
 * initialized it); a no-op when not joined. */
void brisk_world_leave(void);

#endif
