/* The plugin's brisk_nccl_rt (parallel/comm_nccl.h): NCCL from
 * libnccl.so.2 (dlopen, at the first call), the CUDA runtime, and the tree
 * sum of kernels/comm.cu. */
#ifndef BRISK_BACKEND_CUDA_RT_NCCL_H
#define BRISK_BACKEND_CUDA_RT_NCCL_H

#include "parallel/comm_nccl.h"

extern const brisk_nccl_rt brisk_nccl_rt_cuda;

#endif
