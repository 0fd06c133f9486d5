/* Warp and block reductions shared by the kernel families. Each has a fixed
 * combination order (butterfly within a warp, then warp totals in order), so
 * results do not depend on timing, only on blockDim. */
#ifndef BRISK_KERNELS_BLOCK_REDUCE_CUH
#define BRISK_KERNELS_BLOCK_REDUCE_CUH

#include "simt.h"

#define BRISK_FULL_MASK 0xffffffffu

static __device__ __forceinline__ float brisk_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(BRISK_FULL_MASK, v, o);
  return v;
}

static __device__ __forceinline__ float brisk_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(BRISK_FULL_MASK, v, o));
  return v;
}

/* The sum (MAX: the maximum) of v over a 1-D block whose size is a multiple
 * of 32; every thread gets it. red: [32] shared floats, free for reuse when
 * this returns (the leading barrier protects an earlier reduction's use). */
template <bool MAX>
static __device__ __forceinline__ float brisk_block_reduce(float v, float *red /* [32] */) {
  v = MAX ? brisk_warp_max(v) : brisk_warp_sum(v);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < n_warps ? red[lane] : (MAX ? -INFINITY : 0.0f);
  return MAX ? brisk_warp_max(v) : brisk_warp_sum(v);
}

#endif
