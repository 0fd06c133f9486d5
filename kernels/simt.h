/* The portability layer of the kernel files (kernels/NAME.cu), included first by every kernel file.
 *
 * Under nvcc (__CUDACC__) it maps the macros below onto CUDA. Otherwise
 * (BRISK_SIMT_EMU) it includes the SIMT emulation of tests/simt/, which runs
 * the same source as host C++17: blocks one after another, a block's threads
 * as fibers, __syncthreads as a barrier, warp shuffles and votes as per-warp
 * meetings, shared memory per block.
 *
 *   BRISK_SHARED(type, name, count)  a static shared array `type name[count]`
 *                                     (in emulation: a block-owned pointer,
 *                                     the same for every thread of the block,
 *                                     one per declaration site)
 *   BRISK_DYN_SHARED(type, name)     `type *name`: the launch's dynamic shared
 *                                     memory (16-byte aligned)
 *   BRISK_LAUNCH(kernel, grid, block, smem_bytes, stream, args...)
 *                                     launches and returns an int status: 0,
 *                                     or the CUDA error code (emulation: the
 *                                     same codes for an invalid configuration,
 *                                     719 for a kernel that deadlocks or
 *                                     misuses a warp operation)
 * A template kernel may be named directly (BRISK_LAUNCH(k<256, true>, ...)):
 * the macro passes everything through to one function. */
#ifndef BRISK_KERNELS_SIMT_H
#define BRISK_KERNELS_SIMT_H

#include "kstream.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)

#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_runtime.h>

#  define BRISK_SHARED(type, name, count) __shared__ type name[count]
#  define BRISK_DYN_SHARED(type, name)                                                             \
    extern __shared__ __align__(16) unsigned char brisk_dyn_smem_[];                               \
    type *name = reinterpret_cast<type *>(brisk_dyn_smem_)

namespace brisk_simt {
/* Dynamic shared memory above the 48 KiB default needs the kernel's opt-in
 * attribute (up to 227 KiB on sm_90). */
template <typename... P, typename... A>
static inline int launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                         brisk_kstream stream, A... args) {
  if (smem > 48 * 1024) {
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }
  kernel<<<grid, block, smem, (cudaStream_t)stream>>>(args...);
  return (int)cudaGetLastError();
}
} // namespace brisk_simt

#  define BRISK_LAUNCH(...) ::brisk_simt::launch(__VA_ARGS__)

#elif defined(BRISK_SIMT_EMU)

#  include "simt_emu.h"

#  define BRISK_SHARED(type, name, count)                                                          \
    static char brisk_shared_site_##name;                                                          \
    type *const name = static_cast<type *>(::brisk_simt::shared_static(                            \
        &brisk_shared_site_##name, sizeof(type) * (size_t)(count), alignof(type)))
#  define BRISK_DYN_SHARED(type, name)                                                             \
    type *const name = static_cast<type *>(::brisk_simt::shared_dynamic())
#  define BRISK_LAUNCH(...) ::brisk_simt::launch(__VA_ARGS__)

#else
#  error "kernels/simt.h: compile with nvcc, or define BRISK_SIMT_EMU for the host emulation"
#endif

#endif
