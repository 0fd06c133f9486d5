/* The NCCL table of the test suite (nccl_emu.c): NCCL over the threads
 * communicator, the device over the SIMT emulation. */
#ifndef BRISK_TESTS_NCCL_EMU_H
#define BRISK_TESTS_NCCL_EMU_H

#include "parallel/comm_nccl.h"

extern const brisk_nccl_rt brisk_nccl_rt_emu;

/* Makes the init of `rank` fail from now on (-1: none). */
void brisk_nccl_emu_fail_init(int rank);

#endif
