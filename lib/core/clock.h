#ifndef BRISK_CORE_CLOCK_H
#define BRISK_CORE_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds since an arbitrary start; never goes backwards. */
uint64_t brisk_now_ns(void);

#endif
