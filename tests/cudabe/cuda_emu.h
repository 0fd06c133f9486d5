/* The CUDA backend over the SIMT emulation, as a device kind of its own
 * ("cudaemu:0"), for the test suite: models load onto it and run every
 * operation through the CUDA backend's host code and the kernels of
 * kernels/, with host memory standing in for the device's. */
#ifndef BRISK_TESTS_CUDA_EMU_H
#define BRISK_TESTS_CUDA_EMU_H

#include "backend/cuda/cuda_rt.h"
#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

extern const brisk_cuda_rt brisk_cuda_rt_emu;

/* Registers the "cudaemu" device kind (once; later calls do nothing). */
brisk_status brisk_cuda_emu_register(void);

/* Emulated devices "cudaemu:0".."cudaemu:N-1" the provider reports
 * (1 by default, at most BRISK_CUDA_EMU_MAX_DEVICES): tensor-parallel
 * tests ask for more. */
#define BRISK_CUDA_EMU_MAX_DEVICES 8
void brisk_cuda_emu_set_device_count(int n);

/* Device memory the emulation may hand out in all (SIZE_MAX: no limit), and
 * what it holds now. */
void brisk_cuda_emu_set_limit(size_t bytes);
size_t brisk_cuda_emu_in_use(void);
/* The same for one device (the limit applies on top of the total one). */
void brisk_cuda_emu_set_device_limit(int device, size_t bytes);
size_t brisk_cuda_emu_device_in_use(int device);
/* Page-locked host memory the emulation holds (graph staging). */
size_t brisk_cuda_emu_pinned_in_use(void);
/* Graphs made executable, updated in place and launched so far. */
void brisk_cuda_emu_graph_counts(uint64_t *instantiated, uint64_t *updated, uint64_t *launched);

#endif
