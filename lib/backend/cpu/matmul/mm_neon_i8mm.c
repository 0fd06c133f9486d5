/* aarch64 NEON kernels, the Armv8.6 I8MM build (mm_neon.h): the sdot
 * kernels, with smmla for the q8_0 and q4_0 tiles of two or more
 * activation rows (mm_neon_mmla.h). */
#include "backend/cpu/matmul/mm_neon.h"

#ifdef BRISK_MM_HAVE_NEON
#  define NEON_DOT 1
#  define NEON_I8MM 1
#  include "backend/cpu/matmul/mm_neon_body.h"
#else
/* ISO C wants a translation unit to declare something. */
typedef int brisk_mm_neon_i8mm_unused;
#endif
