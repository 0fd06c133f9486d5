/* 64-bit non-cryptographic hash: XXH64 (Yann Collet's algorithm, written
 * here from its specification). Used for prefix-cache block hashes. */
#ifndef BRISK_CORE_HASH_H
#define BRISK_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t brisk_hash64(const void *data, size_t len, uint64_t seed);

#endif
