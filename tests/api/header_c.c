/* Compiled with -std=c11 -Wpedantic -Werror, linked against the shared
 * library: the header stands alone and the stable entry points resolve. */
#include "brisk.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  if (brisk_version_number() != BRISK_VERSION_NUMBER) return 1;
  if (brisk_abi_version() != BRISK_ABI_VERSION) return 1;
  if (strcmp(brisk_status_string(BRISK_OK), "ok") != 0) return 1;
  brisk_allocator a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  if (brisk_set_allocator(&a) != BRISK_E_INVALID_ARGUMENT) return 1;
  if (brisk_last_error()[0] == 0) return 1;
  int32_t reused = -1;
  if (brisk_seq_match_prefix(NULL, 0, NULL, 0, &reused) != BRISK_E_INVALID_ARGUMENT) return 1;
  printf("%s\n", brisk_system_info());
  return 0;
}
