/* Recognizing special tokens in input text: a byte trie over the texts of
 * CONTROL, USER_DEFINED and UNKNOWN tokens, matched leftmost-longest. */
#include "tokenizer/vocab_internal.h"

#include "core/alloc.h"
#include "core/error.h"

static brisk_status trie_child(brisk_vocab *v, int32_t node, uint8_t byte, int32_t *out) {
  for (int32_t c = v->trie[node].child; c >= 0; c = v->trie[c].sibling) {
    if (v->trie[c].byte == byte) {
      *out = c;
      return BRISK_OK;
    }
  }
  if (v->n_trie >= INT32_MAX) return brisk_error_oom();
  if (brisk_grow((void **)&v->trie, &v->trie_cap, v->n_trie + 1, sizeof *v->trie) != 0)
    return brisk_error_oom();
  int32_t c = (int32_t)v->n_trie++;
  v->trie[c] = (brisk_trie_node){-1, v->trie[node].child, -1, -1, byte};
  v->trie[node].child = c;
  *out = c;
  return BRISK_OK;
}

brisk_status brisk_vocab_build_trie(brisk_vocab *v) {
  const uint16_t special =
      BRISK_TOKEN_ATTR_CONTROL | BRISK_TOKEN_ATTR_USER_DEFINED | BRISK_TOKEN_ATTR_UNKNOWN;
  if (brisk_grow((void **)&v->trie, &v->trie_cap, 1, sizeof *v->trie) != 0)
    return brisk_error_oom();
  v->trie[0] = (brisk_trie_node){-1, -1, -1, -1, 0};
  v->n_trie = 1;
  for (int32_t id = 0; id < v->n_tokens; id++) {
    uint16_t a = v->attrs[id];
    size_t n = v->strs.len[id];
    if (!(a & special) || n == 0) continue;
    /* Texts of this vocabulary's own duplicates: the last id wins. */
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
      uint8_t b = (uint8_t)v->strs.pool[v->strs.off[id] + i];
      brisk_status st = trie_child(v, node, b, &node);
      if (st != BRISK_OK) return st;
    }
    v->trie[node].id_any = id;
    if (a & BRISK_TOKEN_ATTR_USER_DEFINED) v->trie[node].id_user = id;
    uint8_t b0 = (uint8_t)v->strs.pool[v->strs.off[id]];
    v->first_any[b0 >> 3] |= (uint8_t)(1u << (b0 & 7));
    if (a & BRISK_TOKEN_ATTR_USER_DEFINED) v->first_user[b0 >> 3] |= (uint8_t)(1u << (b0 & 7));
  }
  return BRISK_OK;
}

int32_t brisk_vocab_match_special(const brisk_vocab *v, const char *s, size_t n, bool parse_special,
                                  size_t *match_len) {
  const uint8_t *first = parse_special ? v->first_any : v->first_user;
  uint8_t b0 = (uint8_t)s[0];
  if (!(first[b0 >> 3] & (1u << (b0 & 7)))) return -1;
  int32_t node = 0, best = -1;
  for (size_t i = 0; i < n; i++) {
    int32_t c = v->trie[node].child;
    while (c >= 0 && v->trie[c].byte != (uint8_t)s[i]) c = v->trie[c].sibling;
    if (c < 0) break;
    node = c;
    int32_t id = parse_special ? v->trie[node].id_any : v->trie[node].id_user;
    if (id >= 0) {
      best = id;
      *match_len = i + 1;
    }
  }
  return best;
}
