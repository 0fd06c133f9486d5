/* The core calls inside a plugin, over the host table (core/plugin_shim.h). */
#include "core/plugin_shim.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static const brisk_plugin_host *host;

void brisk_plugin_shim_init(const brisk_plugin_host *h) { host = h; }

brisk_status brisk_error(brisk_status status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return host->error(status, msg);
}

brisk_status brisk_error_oom(void) { return host->error(BRISK_E_OUT_OF_MEMORY, "out of memory"); }

void brisk_log(brisk_log_level level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  host->log(level, msg);
}

void *brisk_malloc(size_t size) { return host->malloc(size); }
void *brisk_calloc(size_t count, size_t size) { return host->calloc(count, size); }
void brisk_free(void *ptr) { host->free(ptr); }
