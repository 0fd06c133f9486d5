/* The plugin's side of the host table (host_shim.c). */
#ifndef BRISK_BACKEND_CUDA_HOST_SHIM_H
#define BRISK_BACKEND_CUDA_HOST_SHIM_H

#include "backend/plugin.h"

void brisk_plugin_shim_init(const brisk_plugin_host *h);

#endif
