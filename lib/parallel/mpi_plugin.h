/* The interface between libbrisk and the MPI plugin (libbrisk-mpi.so):
 * comm_mpi.c built against Open MPI into a module of its own, which
 * libbrisk opens with dlopen the first time a process joins an MPI world
 * (parallel/world.h), so that libbrisk itself never links libmpi and a
 * program that does not use MPI never loads it.
 *
 * The plugin exports one function, BRISK_MPI_PLUGIN_ENTRY: called once
 * after dlopen with libbrisk's host table (core/dso.h), it fills the API
 * table. Plugin and library are built from one tree: the ABI number and the
 * version string must both match, or the plugin is refused. The
 * communicator the plugin makes is an ordinary brisk_comm whose operations
 * are the plugin's functions. */
#ifndef BRISK_PARALLEL_MPI_PLUGIN_H
#define BRISK_PARALLEL_MPI_PLUGIN_H

#include "core/dso.h"
#include "parallel/comm.h"

#include <stdint.h>

#define BRISK_MPI_PLUGIN_ABI 1
#define BRISK_MPI_PLUGIN_ENTRY "brisk_mpi_plugin_entry_v1"
#define BRISK_MPI_PLUGIN_FILE "libbrisk-mpi.so"

typedef struct brisk_mpi_plugin_api {
  uint32_t abi;
  const char *version; /* the brisk version the plugin was built from */
  /* This process's rank of MPI_COMM_WORLD (comm_mpi.h's
   * brisk_comm_mpi_world): initializes MPI if the program has not. */
  brisk_status (*world)(brisk_comm **out);
  /* A part of a communicator of the plugin's (brisk_comm_mpi_split). */
  brisk_status (*split)(brisk_comm *c, int color, int key, brisk_comm **out);
} brisk_mpi_plugin_api;

typedef brisk_status (*brisk_mpi_plugin_entry_fn)(const brisk_plugin_host *host,
                                                  brisk_mpi_plugin_api *api);

#endif
