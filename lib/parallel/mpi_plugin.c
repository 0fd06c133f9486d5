/* libbrisk-mpi.so's entry point (parallel/mpi_plugin.h): the MPI
 * communicator of comm_mpi.c, its core calls routed to the host table. */
#include "parallel/mpi_plugin.h"

#include "brisk_config.h"
#include "core/plugin_shim.h"
#include "parallel/comm_mpi.h"

#include <string.h>

__attribute__((visibility("default"))) brisk_status
brisk_mpi_plugin_entry_v1(const brisk_plugin_host *h, brisk_mpi_plugin_api *api);

brisk_status brisk_mpi_plugin_entry_v1(const brisk_plugin_host *h, brisk_mpi_plugin_api *api) {
  if (!h || !api || h->abi != BRISK_PLUGIN_HOST_ABI) return BRISK_E_INVALID_ARGUMENT;
  brisk_plugin_shim_init(h);
  memset(api, 0, sizeof *api);
  api->abi = BRISK_MPI_PLUGIN_ABI;
  api->version = BRISK_VERSION_STRING;
  api->world = brisk_comm_mpi_world;
  api->split = brisk_comm_mpi_split;
  return BRISK_OK;
}
