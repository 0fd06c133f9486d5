/* A plugin's side of the host table (core/dso.h): compiled into a plugin
 * (libbrisk-mpi.so), never into libbrisk. The core's error, log and
 * allocation calls of the code compiled into the plugin go to the table
 * libbrisk handed over, so its messages reach brisk_last_error and its
 * memory the allocator hook. */
#ifndef BRISK_CORE_PLUGIN_SHIM_H
#define BRISK_CORE_PLUGIN_SHIM_H

#include "core/dso.h"

/* Called first by the plugin's entry point. */
void brisk_plugin_shim_init(const brisk_plugin_host *h);

#endif
