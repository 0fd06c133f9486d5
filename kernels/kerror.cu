/* Launcher statuses to messages, for the host side's brisk_error calls. */
#include "simt.h"

#include "kerror.h"

extern "C" const char *brisk_kerror_string(int status) {
  if (status == 0) return "no error";
#if defined(__CUDACC__)
  return cudaGetErrorString(static_cast<cudaError_t>(status));
#else
  const char *last = brisk_simt_last_error();
  if (last[0]) return last;
  switch (status) {
  case brisk_simt::ERR_INVALID_VALUE:
    return "invalid argument (a type or size the kernel does not take)";
  case brisk_simt::ERR_INVALID_CONFIG: return "invalid launch configuration";
  case brisk_simt::ERR_LAUNCH_FAILURE: return "kernel launch failed";
  default: return "kernel error";
  }
#endif
}
