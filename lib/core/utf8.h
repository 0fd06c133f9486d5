/* UTF-8 validation, shared by the file parsers (keys, names, JSON text). */
#ifndef BRISK_CORE_UTF8_H
#define BRISK_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF, no
 * truncated sequence at the end. NUL bytes are valid characters. */
bool brisk_utf8_valid(const char *s, size_t len);

#endif
