/* brisk version: what this build is and what this machine offers. */
#include "brisk.h"
#include "cli.h"

#include <string.h>

int cmd_version(int argc, char **argv);

int cmd_version(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--json") != 0)
      return cli_fail("version", "unexpected argument '%s'", argv[i]);
  if (cli_has_flag(argc, argv, "--json")) {
    printf("{\"version\": ");
    cli_json_string(stdout, brisk_version_string());
    printf(", \"abi\": %d, \"system\": ", brisk_abi_version());
    cli_json_string(stdout, brisk_system_info());
    printf("}\n");
  } else {
    printf("brisk %s (ABI %d)\n%s\n", brisk_version_string(), brisk_abi_version(),
           brisk_system_info());
  }
  return 0;
}
