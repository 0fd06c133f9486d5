/* Lookups over the generated Unicode tables (tokenizer/bert_unicode.h). */
#include "tokenizer/bert_unicode.h"

static bool in_ranges(const brisk_cp_range *r, size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp < r[mid].lo)
      hi = mid;
    else if (cp > r[mid].hi)
      lo = mid + 1;
    else
      return true;
  }
  return false;
}

/* The entry for cp, or NULL. */
static const brisk_cp_map *find_map(const brisk_cp_map *m, size_t n, uint32_t cp) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m[mid].cp < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && m[lo].cp == cp ? &m[lo] : NULL;
}

bool brisk_cp_is_other(uint32_t cp) {
  const brisk_bert_unicode *u = &brisk_bert_unicode_tables;
  return in_ranges(u->other, u->n_other, cp);
}

bool brisk_cp_is_punct(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  const brisk_bert_unicode *u = &brisk_bert_unicode_tables;
  return in_ranges(u->punct, u->n_punct, cp);
}

bool brisk_cp_is_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool brisk_cp_is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

size_t brisk_cp_strip_accents(uint32_t cp, uint32_t out[3]) {
  if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T), none of them marks */
    uint32_t s = cp - 0xAC00, t = s % 28;
    out[0] = 0x1100 + s / (21 * 28);
    out[1] = 0x1161 + (s % (21 * 28)) / 28;
    if (!t) return 2;
    out[2] = 0x11A7 + t;
    return 3;
  }
  const brisk_bert_unicode *u = &brisk_bert_unicode_tables;
  const brisk_cp_map *e = find_map(u->strip, u->n_strip, cp);
  if (!e) {
    out[0] = cp;
    return 1;
  }
  for (uint32_t i = 0; i < e->n; i++) out[i] = e->out[i];
  return e->n;
}

size_t brisk_cp_lower(uint32_t cp, uint32_t out[3]) {
  if (cp < 0x80) {
    out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return 1;
  }
  const brisk_bert_unicode *u = &brisk_bert_unicode_tables;
  const brisk_cp_map *e = find_map(u->lower, u->n_lower, cp);
  if (!e) {
    out[0] = cp;
    return 1;
  }
  for (uint32_t i = 0; i < e->n; i++) out[i] = e->out[i];
  return e->n;
}
