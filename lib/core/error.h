/* Thread-local last error: every failing public call sets it. */
#ifndef BRISK_CORE_ERROR_H
#define BRISK_CORE_ERROR_H

#include "brisk.h"

/* Formats the thread's last-error message and returns `status`, so that a
 * failure reads `return brisk_error(BRISK_E_FORMAT, "tensor '%s' ...", name);`. */
brisk_status brisk_error(brisk_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same with the status's own name as message. */
brisk_status brisk_error_oom(void);
/* BRISK_E_OUT_OF_MEMORY with "<what>: <bytes> bytes: out of memory", and
 * the memory limit that refused them when one did (core/memcap.h). */
brisk_status brisk_error_oom_bytes(const char *what, size_t bytes);

#endif
