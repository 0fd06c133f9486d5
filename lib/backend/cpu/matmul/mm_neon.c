/* aarch64 NEON kernels, plain Advanced SIMD build (mm_neon.h), and the
 * table the driver asks: the sdot build (mm_neon_dot.c) or the sdot + smmla
 * build (mm_neon_i8mm.c) where the level allows it. */
#include "backend/cpu/matmul/mm_neon.h"

#ifdef BRISK_MM_HAVE_NEON
#  define NEON_DOT 0
#  include "backend/cpu/matmul/mm_neon_body.h"

brisk_mm_tile_fn brisk_mm_neon_tile_dot(uint32_t w_type);
brisk_mm_tile_fn brisk_mm_neon_tile_i8mm(uint32_t w_type);

brisk_mm_tile_fn brisk_mm_neon_tile(uint32_t w_type, brisk_isa_level level) {
  return level >= BRISK_ISA_NEON_I8MM      ? brisk_mm_neon_tile_i8mm(w_type)
         : level >= BRISK_ISA_NEON_DOTPROD ? brisk_mm_neon_tile_dot(w_type)
                                           : brisk_mm_neon_tile_base(w_type);
}
#else
brisk_mm_tile_fn brisk_mm_neon_tile(uint32_t w_type, brisk_isa_level level) {
  (void)w_type;
  (void)level;
  return NULL;
}
#endif
