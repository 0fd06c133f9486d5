/* Shared pieces of the aarch64 NEON kernels (mm_neon.c, mm_neon_dot.c,
 * mm_neon_i8mm.c).
 *
 * The kernels are written once, in mm_neon_body.h, and compiled three
 * times: for plain Advanced SIMD (every AArch64 CPU; int8 dot products by
 * widening multiplies and pairwise adds), with the target attribute of the
 * Armv8.2 DotProd extension (sdot), and with DotProd + I8MM (smmla for the
 * q8_0 / q4_0 tiles of several activation rows), chosen at run time
 * (core/cpu.h levels BRISK_ISA_NEON, BRISK_ISA_NEON_DOTPROD and
 * BRISK_ISA_NEON_I8MM). Functions carry the attribute instead of a global
 * -march flag, so the library still runs on any AArch64. The I8MM build
 * needs a compiler with the smmla intrinsics behind a target attribute
 * (gcc 10 and later; clang takes "dotprod,i8mm").
 *
 * Every kernel gives the scalar kernels' (mm_scalar.c) results bit for bit:
 * the integer block sums are exact in any order, and the float steps per
 * output are the scalar ones in the scalar order (a separate multiply and
 * add, no fused multiply-add; float weights keep the scalar kernels' 8
 * interleaved partial sums and their final tree). */
#ifndef BRISK_BACKEND_CPU_MATMUL_MM_NEON_H
#define BRISK_BACKEND_CPU_MATMUL_MM_NEON_H

#include "backend/cpu/matmul/mm_internal.h"

#if defined(__aarch64__) && defined(__GNUC__)
#  define BRISK_MM_HAVE_NEON 1
#endif

#endif
