/* aarch64 NEON kernels, the Armv8.2 DotProd (sdot) build (mm_neon.h). */
#include "backend/cpu/matmul/mm_neon.h"

#ifdef BRISK_MM_HAVE_NEON
#  define NEON_DOT 1
#  include "backend/cpu/matmul/mm_neon_body.h"
#else
/* ISO C wants a translation unit to declare something. */
typedef int brisk_mm_neon_dot_unused;
#endif
