#include "brisk.h"
#include "brisk_config.h"
#include "core/cpu.h"

#include <pthread.h>
#include <stdio.h>

BRISK_API const char *brisk_version_string(void) { return BRISK_VERSION_STRING; }
BRISK_API int brisk_version_number(void) { return BRISK_VERSION_NUMBER; }
BRISK_API int brisk_abi_version(void) { return BRISK_ABI_VERSION; }

static char info[256];
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

static void build_info(void) {
  const brisk_cpu_features *f = brisk_cpu();
  snprintf(info, sizeof info,
           "brisk %s; cpu:%s%s%s%s%s%s%s%s%s%s%s%s; kernels: %s; threads: %d; cuda plugin: %s",
           BRISK_VERSION_STRING, f->avx2 ? " avx2" : "", f->fma ? " fma" : "",
           f->f16c ? " f16c" : "", f->avxvnni ? " avxvnni" : "", f->avx512f ? " avx512f" : "",
           f->avx512bw && f->avx512vl ? " avx512bw/vl" : "", f->avx512vnni ? " avx512vnni" : "",
           f->avx512bf16 ? " avx512bf16" : "", f->neon ? " neon" : "", f->dotprod ? " dotprod" : "",
           f->i8mm ? " i8mm" : "",
           (f->avx2 || f->fma || f->f16c || f->avx512f || f->neon) ? "" : " scalar",
           brisk_isa_name(brisk_cpu_isa_level()), brisk_cpu_count(),
           BRISK_HAVE_CUDA_BUILD ? "built (devices: brisk_device_count)" : "not built");
}

BRISK_API const char *brisk_system_info(void) {
  pthread_once(&info_once, build_info);
  return info;
}
