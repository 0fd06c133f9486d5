/* AVX2 kernels for the packed _R8 layouts (pack.h) of q4_k, q5_k and q6_k
 * against Q8_K activations; the kernels and their reasoning are in
 * mm_r8_k_avx2.h, shared with AVX-VNNI. */
#include "backend/cpu/matmul/mm_internal.h"

#include "backend/cpu/matmul/mm_avx2.h"
#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/blocks.h"

#define R8K_TILE_FN brisk_mm_avx2_r8_k_tile
#define R8K_DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#include "backend/cpu/matmul/mm_r8_k_avx2.h"
