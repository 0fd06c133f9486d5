/* Seeds for fuzz_engine: a few requests of each kind submitted, stepped and
 * polled, one cancelled, in engines of every shape byte class. */
#include "fuzz_seeds.h"

#include <stdio.h>

int fuzz_write_seeds(const char *dir) {
  static const unsigned char ops[][6] = {
      {0, 10, 5, 3, 0, 0},     {0, 20, 9, 5, 1, 1}, {0, 4, 11, 2, 2, 2}, {2, 0, 0, 0, 0, 0},
      {3, 8, 0, 0, 0, 0},      {0, 30, 7, 1, 4, 0}, {0, 12, 6, 9, 8, 3}, {2, 0, 0, 0, 0, 0},
      {1, 1, 0, 0, 0, 0},      {2, 0, 0, 0, 0, 0},  {3, 3, 0, 0, 0, 0},  {0, 5, 8, 4, 16, 0},
      {0, 40, 10, 7, 0x61, 1}, {2, 0, 0, 0, 0, 0},  {2, 0, 0, 0, 0, 0},  {3, 8, 0, 0, 0, 0},
  };
  int bad = 0;
  const unsigned char shapes[] = {0x00, 0x15, 0x2a, 0x7f, 0xc3};
  for (size_t k = 0; k < sizeof shapes; k++) {
    unsigned char buf[1 + sizeof ops];
    buf[0] = shapes[k];
    for (size_t i = 0; i < sizeof ops; i++) buf[1 + i] = ((const unsigned char *)ops)[i];
    char name[32];
    snprintf(name, sizeof name, "session-%zu", k);
    bad |= fuzz_seed_save(dir, name, buf, sizeof buf);
  }
  return bad;
}
