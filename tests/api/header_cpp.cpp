// brisk.h as C++ (-std=c++11 -Wpedantic -Werror), linked to the shared library.
#include "brisk.h"

#include <cstring>
#include <string>

int main() {
  std::string v = brisk_version_string();
  if (v.empty() || brisk_version_number() != BRISK_VERSION_NUMBER) return 1;
  brisk_status st = brisk_set_log_callback(nullptr, nullptr, BRISK_LOG_WARN);
  if (st != BRISK_OK) return 1;
  if (std::strcmp(brisk_status_string(BRISK_E_CANCELLED), "cancelled") != 0) return 1;
  return 0;
}
