/* brisk version: what this build is and what this machine offers. The
 * backends listed are the ones compiled into this program and usable here:
 * the CPU backend (its kernels chosen at run time from the processor's
 * features). A CUDA toolchain found at build time is not a CUDA backend:
 * none exists in this version, so none is claimed. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include "backend/cpu/ops/cpu_backend.h"
#include "core/cpu.h"

#include <string.h>

int cmd_version(int argc, char **argv);

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
                 "kernels use, the thread count and the backends this build has.",
      .groups = groups,
      .n_groups = 1,
  };
  int rc = cli_parse(&spec, argc, argv);
  if (rc != CLI_CONTINUE) return rc;
  const brisk_cpu_features *f = brisk_cpu();
  const char *names[] = {"avx2", "fma", "f16c", "avx512f"};
  const bool have[] = {f->avx2, f->fma, f->f16c, f->avx512f};
  char features[64] = "";
  for (int i = 0; i < 4; i++)
    if (have[i])
      snprintf(features + strlen(features), sizeof features - strlen(features), "%s%s",
               features[0] ? " " : "", names[i]);
  if (!features[0]) snprintf(features, sizeof features, "scalar");
  /* Ask the backend itself: created, it is built and usable here, and its
   * name says which kernels this processor gets ("cpu-avx2"). */
  brisk_backend *be = NULL;
  char cpu_backend[32] = "unavailable";
  if (brisk_backend_cpu_create(NULL, BRISK_CPU_ISA_AUTO, &be) == BRISK_OK) {
    snprintf(cpu_backend, sizeof cpu_backend, "%s", be->name);
    brisk_backend_free(be);
  }
  if (json) {
    printf("{\"version\": ");
    cli_json_string(stdout, brisk_version_string());
    printf(", \"abi\": %d, \"cpu_features\": ", brisk_abi_version());
    cli_json_string(stdout, features);
    printf(", \"threads\": %d, \"backends\": [", brisk_cpu_count());
    cli_json_string(stdout, cpu_backend);
    printf("], \"system\": \"cpu: %s; threads: %d; backends: %s\"}\n", features, brisk_cpu_count(),
           cpu_backend);
  } else {
    printf("brisk %s (ABI %d)\n", brisk_version_string(), brisk_abi_version());
    printf("cpu:      %s, %d threads\n", features, brisk_cpu_count());
    printf("backends: %s (built and usable here; no CUDA backend exists yet)\n", cpu_backend);
  }
  return 0;
}
