/* brisk version: what this build is and what this machine offers. It lists
 * what brisk can run on here, asked of the library itself: the CPU backend
 * (created, so its name says which kernels this processor gets) and the
 * devices brisk_device_count finds (CUDA ones only when the CUDA plugin and
 * a driver are present). A CUDA compiler found at build time is not a CUDA
 * device, so nothing is claimed without one; when CUDA is unusable, the
 * library's reason is shown. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include "backend/cpu/ops/cpu_backend.h"
#include "core/cpu.h"

#include <string.h>

int cmd_version(int argc, char **argv);

static double gib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

int cmd_version(int argc, char **argv) {
  bool json = false;
  const cli_opt opts[] = {
      {CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")},
  };
  const cli_group groups[] = {{"output", opts, 1}};
  const cli_spec spec = {
      .cmd = "version",
      .usage = "[--json]",
      .summary = "Prints the library version, the ABI version, the processor features the\n"
                 "kernels use, the thread count, and the devices brisk can run on here\n"
                 "(the CPU, and CUDA GPUs when the CUDA plugin and a driver are present;\n"
                 "otherwise why CUDA is not usable).",
      .groups = groups,
      .n_groups = 1,
  };
  int rc = cli_parse(&spec, argc, argv);
  if (rc != CLI_CONTINUE) return rc;
  const brisk_cpu_features *f = brisk_cpu();
  const char *names[] = {"avx2", "fma", "f16c", "avx512f", "neon", "dotprod", "i8mm"};
  const bool have[] = {f->avx2, f->fma, f->f16c, f->avx512f, f->neon, f->dotprod, f->i8mm};
  char features[64] = "";
  for (int i = 0; i < 7; i++)
    if (have[i])
      snprintf(features + strlen(features), sizeof features - strlen(features), "%s%s",
               features[0] ? " " : "", names[i]);
  if (!features[0]) snprintf(features, sizeof features, "scalar");
  brisk_backend *be = NULL;
  char cpu_backend[32] = "unavailable";
  if (brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be) == BRISK_OK) {
    snprintf(cpu_backend, sizeof cpu_backend, "%s", be->name);
    brisk_backend_free(be);
  }
  const int32_t n_dev = brisk_device_count();
  brisk_device_props dev[16];
  int32_t n_shown = 0;
  for (int32_t i = 0; i < n_dev && n_shown < 16; i++) {
    dev[n_shown] = (brisk_device_props){.struct_size = sizeof dev[0]};
    if (brisk_device_info(i, &dev[n_shown]) == BRISK_OK) n_shown++;
  }
  /* Why CUDA is not usable, in the library's words ("" when it is). */
  char cuda_why[512] = "";
  if (brisk_device_check("cuda") != BRISK_OK)
    snprintf(cuda_why, sizeof cuda_why, "%s", brisk_last_error());

  if (json) {
    printf("{\"version\": ");
    cli_json_string(stdout, brisk_version_string());
    printf(", \"abi\": %d, \"cpu_features\": ", brisk_abi_version());
    cli_json_string(stdout, features);
    printf(", \"threads\": %d, \"backends\": [", brisk_cpu_count());
    cli_json_string(stdout, cpu_backend);
    printf("], \"devices\": [");
    for (int32_t i = 0; i < n_shown; i++) {
      printf("%s{\"id\": ", i ? ", " : "");
      cli_json_string(stdout, dev[i].id);
      printf(", \"kind\": \"%s\", \"name\": ", dev[i].kind == BRISK_DEVICE_CUDA ? "cuda" : "cpu");
      cli_json_string(stdout, dev[i].name);
      printf(", \"total_memory\": %llu, \"free_memory\": %llu",
             (unsigned long long)dev[i].total_memory, (unsigned long long)dev[i].free_memory);
      if (dev[i].kind == BRISK_DEVICE_CUDA)
        printf(", \"compute_capability\": \"%d.%d\"", dev[i].compute_major, dev[i].compute_minor);
      printf("}");
    }
    printf("], \"cuda\": {\"usable\": %s, \"why_not\": ", cuda_why[0] ? "false" : "true");
    cli_json_string(stdout, cuda_why);
    printf("}, \"system\": \"cpu: %s; threads: %d; backends: %s; devices: %d\"}\n", features,
           brisk_cpu_count(), cpu_backend, n_shown);
  } else {
    printf("brisk %s (ABI %d)\n", brisk_version_string(), brisk_abi_version());
    printf("cpu:      %s, %d threads (kernels: %s)\n", features, brisk_cpu_count(), cpu_backend);
    for (int32_t i = 0; i < n_shown; i++) {
      printf("%-10s%-8s %s, %.1f GiB", i ? "" : "devices:", dev[i].id, dev[i].name,
             gib(dev[i].total_memory));
      if (dev[i].kind == BRISK_DEVICE_CUDA)
        printf(", compute %d.%d", dev[i].compute_major, dev[i].compute_minor);
      printf("\n");
    }
    if (cuda_why[0]) printf("cuda:     not usable: %s\n", cuda_why);
  }
  return 0;
}
