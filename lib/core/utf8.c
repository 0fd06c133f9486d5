#include "core/utf8.h"

#include <stdint.h>

bool brisk_utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
      n = 1, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
      n = 2, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 3, cp = c & 0x07, min = 0x10000;
    else
      return false; /* continuation byte, overlong 2-byte lead, or > U+10FFFF lead */
    if (len - i - 1 < n) return false;
    for (size_t k = 1; k <= n; k++) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}
