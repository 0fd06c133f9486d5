/* The CUDA runtime's brisk_cuda_rt (the plugin's). */
#ifndef BRISK_BACKEND_CUDA_RT_CUDART_H
#define BRISK_BACKEND_CUDA_RT_CUDART_H

#include "backend/cuda/cuda_rt.h"

extern const brisk_cuda_rt brisk_cuda_rt_cudart;

#endif
