/* Seed-corpus generators: seeds_NAME.c defines fuzz_write_seeds(), and
 * fuzz_seeds_main.c calls it with the output folder. */
#ifndef BRISK_FUZZ_SEEDS_H
#define BRISK_FUZZ_SEEDS_H

#include <stddef.h>

/* Writes the target's seeds into `dir` (which exists); 0 on success. */
int fuzz_write_seeds(const char *dir);
/* Writes one seed file dir/name; 0 on success (prints why not otherwise). */
int fuzz_seed_save(const char *dir, const char *name, const void *data, size_t size);

#endif
