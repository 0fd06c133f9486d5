/* UTF-8 helpers for the tokenizers: strict decoding that never reads past the
 * end and treats every byte of an invalid sequence as a unit of its own, and
 * GPT-2's byte-to-unicode table for byte-level BPE. */
#ifndef BRISK_TOKENIZER_UTF8_H
#define BRISK_TOKENIZER_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0, n) (1..4), or 0 if s does not
 * start with one (overlong, surrogate, past U+10FFFF, truncated, or a stray
 * continuation byte). n must be >= 1. Decoded code point in *cp if non-NULL. */
size_t brisk_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);

/* Number of bytes of the unit starting at s: a whole valid sequence, or 1 for
 * a byte that does not start one. */
static inline size_t brisk_utf8_unit(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t k = brisk_utf8_seq(s, n, NULL);
  return k ? k : 1;
}

/* Encodes cp (<= U+10FFFF) into out (4 bytes room); returns the length. */
size_t brisk_utf8_encode(uint32_t cp, char *out);

/* Bytes at the end of s[0, n) that form the valid start of a sequence still
 * missing bytes (0..3): what a streaming decoder must hold back. */
size_t brisk_utf8_incomplete_tail(const unsigned char *s, size_t n);

/* GPT-2's reversible byte <-> code point map: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in byte order. */
uint32_t brisk_byte_to_cp(uint8_t b);
/* The byte for a code point of that map, or -1 if cp is not in it. */
int brisk_cp_to_byte(uint32_t cp);

#endif
