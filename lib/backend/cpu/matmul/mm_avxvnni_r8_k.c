/* AVX-VNNI kernels for the packed _R8 layouts of q4_k, q5_k and q6_k:
 * mm_avx2_r8_k.c with each madd (by the sub-block scale) + add replaced by
 * one vpdpwssd (VEX), which forms the same int32 sums without the separate
 * add. Same shapes, exact integers and float steps: the AVX2 kernels' bits.
 * Run at BRISK_ISA_AVXVNNI (core/cpu.h) when the CPU has AVX-VNNI. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#ifdef BRISK_MM_HAVE_AVX2
#  undef MM_TARGET
#  define MM_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#endif
#define R8K_TILE_FN brisk_mm_avxvnni_r8_k_tile
#define R8K_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#include "backend/cpu/matmul/mm_r8_k_avx2.h"
