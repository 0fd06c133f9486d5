#include "core/log.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

/* The sink is three words; they are published together under a tiny spin
 * lock so a concurrent message never sees a callback with the wrong user data. */
static atomic_flag sink_lock = ATOMIC_FLAG_INIT;
static brisk_log_fn sink_fn;
static void *sink_user;
/* Quiet by default: a library embedded in an app writes nothing to the
 * process's stdout or stderr until the host asks (brisk_set_log_callback). */
static _Atomic int sink_min_level = BRISK_LOG_NONE;

BRISK_API brisk_status brisk_set_log_callback(brisk_log_fn fn, void *user_data,
                                              brisk_log_level min_level) {
  if ((int)min_level < BRISK_LOG_DEBUG || (int)min_level > BRISK_LOG_NONE)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "log level %d is not a brisk_log_level",
                       (int)min_level);
  while (atomic_flag_test_and_set_explicit(&sink_lock, memory_order_acquire)) {
  }
  sink_fn = fn;
  sink_user = user_data;
  atomic_store(&sink_min_level, (int)min_level);
  atomic_flag_clear_explicit(&sink_lock, memory_order_release);
  return BRISK_OK;
}

void brisk_log(brisk_log_level level, const char *fmt, ...) {
  if ((int)level < atomic_load_explicit(&sink_min_level, memory_order_relaxed)) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  while (atomic_flag_test_and_set_explicit(&sink_lock, memory_order_acquire)) {
  }
  brisk_log_fn fn = sink_fn;
  void *user = sink_user;
  atomic_flag_clear_explicit(&sink_lock, memory_order_release);
  if (fn) {
    fn(level, line, user);
  } else {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    fprintf(stderr, "brisk %s: %s\n", names[level < 4 ? level : 3], line);
  }
}
