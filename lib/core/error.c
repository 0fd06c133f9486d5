#include "core/error.h"

#include "core/memcap.h"

#include <stdarg.h>
#include <stdio.h>

/* Long enough for a tensor name, a path and a few numbers. */
static _Thread_local char last_error[1024];

brisk_status brisk_error(brisk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

brisk_status brisk_error_oom(void) {
  char why[160];
  if (brisk_mem_describe_hit(why, sizeof why))
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "out of memory: %s", why);
  return brisk_error(BRISK_E_OUT_OF_MEMORY, "out of memory");
}

brisk_status brisk_error_oom_bytes(const char *what, size_t bytes) {
  char why[160];
  if (brisk_mem_describe_hit(why, sizeof why))
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: %zu bytes: out of memory: %s", what, bytes, why);
  return brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: %zu bytes: out of memory", what, bytes);
}

BRISK_API const char *brisk_last_error(void) { return last_error; }

BRISK_API const char *brisk_status_string(brisk_status status) {
  switch (status) {
  case BRISK_OK: return "ok";
  case BRISK_E_INVALID_ARGUMENT: return "invalid argument";
  case BRISK_E_OUT_OF_MEMORY: return "out of memory";
  case BRISK_E_IO: return "i/o error";
  case BRISK_E_FORMAT: return "malformed input";
  case BRISK_E_UNSUPPORTED: return "unsupported";
  case BRISK_E_CANCELLED: return "cancelled";
  case BRISK_E_BUFFER_TOO_SMALL: return "buffer too small";
  case BRISK_E_NOT_FOUND: return "not found";
  case BRISK_E_INVALID_STATE: return "invalid state";
  case BRISK_E_INTERNAL: return "internal error";
  case BRISK_E_KV_FULL: return "KV cache full";
  case BRISK_E_NO_DEVICE: return "no such device";
  }
  return "unknown status";
}
