#ifndef BRISK_CONTEXT_BATCH_H
#define BRISK_CONTEXT_BATCH_H

#include "brisk.h"

struct brisk_batch {
  int32_t n, capacity;
  int32_t *token;      /* [capacity] */
  int32_t *pos;        /* [capacity] */
  int32_t *seq;        /* [capacity] */
  unsigned char *want; /* [capacity] logits wanted */
};

#endif
