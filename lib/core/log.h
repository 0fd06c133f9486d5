/* Library logging, routed to the host's callback (brisk_set_log_callback). */
#ifndef BRISK_CORE_LOG_H
#define BRISK_CORE_LOG_H

#include "brisk.h"

void brisk_log(brisk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define BRISK_DEBUG(...) brisk_log(BRISK_LOG_DEBUG, __VA_ARGS__)
#define BRISK_INFO(...) brisk_log(BRISK_LOG_INFO, __VA_ARGS__)
#define BRISK_WARN(...) brisk_log(BRISK_LOG_WARN, __VA_ARGS__)

#endif
