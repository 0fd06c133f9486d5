/* Text -> tokens: special-token partition, normalization, pre-tokenization,
 * merging in bounded chunks, and the fallbacks for what no token covers. */
#include "tokenizer/merge.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

#include <string.h>

typedef struct tok_ctx {
  const brisk_vocab *v;
  int32_t *out;
  size_t cap, n;
  bool last_unk;
  brisk_merge_ws mw;
  brisk_unit *units; /* [n_units] the chunk being collected */
  size_t n_units, units_cap;
  char *enc; /* scratch: a word in token form, for whole-word lookups */
  size_t enc_cap;
  char *norm[2]; /* normalization ping-pong buffers */
  size_t norm_cap[2];
  brisk_pretok_ws *pws;
  size_t n_unk;   /* unknown tokens emitted so far */
  int32_t *stage; /* [n_stage] tokens of the chunk being flushed */
  size_t n_stage, stage_cap;
  /* Chunk cache: unit ids -> tokens, for text that repeats words. */
  struct cache_slot *slots; /* [n_slots], a power of two up to CACHE_SLOTS */
  size_t n_slots;
  int32_t *pool; /* [pool_cap] keys then values, pool_n used */
  size_t pool_n, pool_cap, n_cached;
} tok_ctx;

/* The cache starts small and doubles as it fills, up to these limits, so a
 * short text pays for a small cache only (a call per paragraph is common). */
enum {
  CACHE_SLOTS = 1 << 15,
  CACHE_MAX_UNITS = 48,
  CACHE_POOL = 1 << 20,
  CACHE_SLOTS_MIN = 1 << 8,
  CACHE_POOL_MIN = 1 << 12
};

typedef struct cache_slot {
  uint64_t hash; /* 0: empty */
  uint32_t off;  /* key at pool[off], values after it */
  uint16_t n_key, n_val;
} cache_slot;

static inline void emit(tok_ctx *c, int32_t id) {
  if (c->n < c->cap) c->out[c->n] = id;
  c->n++;
  c->last_unk = false;
}

/* Chunk output goes through the stage so that it can be cached. */
static inline brisk_status stage(tok_ctx *c, int32_t id) {
  if (brisk_grow((void **)&c->stage, &c->stage_cap, c->n_stage + 1, sizeof *c->stage) != 0)
    return brisk_error_oom();
  c->stage[c->n_stage++] = id;
  c->last_unk = false;
  return BRISK_OK;
}

/* Text no token covers (text[0, len), for the message) becomes the unknown
 * token. Without one, Hugging Face drops the text; brisk_tokenize promises
 * that nothing is lost, so it fails instead. */
static brisk_status emit_unk(tok_ctx *c, const char *text, size_t len) {
  int32_t unk = c->v->special[BRISK_VOCAB_UNK];
  c->n_unk++;
  if (unk < 0) {
    char shown[64];
    size_t n = len < sizeof shown - 1 ? len : sizeof shown - 1;
    for (size_t i = 0; i < n; i++) shown[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    shown[n] = 0;
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tokenize: no token covers '%s' (%zu bytes), and the vocabulary has no "
                       "unknown token or byte tokens to stand for it",
                       shown, len);
  }
  if (c->v->fuse_unk && c->last_unk) return BRISK_OK;
  brisk_status st = stage(c, unk);
  c->last_unk = true;
  return st;
}

/* Whether plain text may turn into this token. */
static inline bool emittable(const brisk_vocab *v, int32_t id) {
  return id >= 0 && id < v->n_tokens &&
         !(v->attrs[id] &
           (BRISK_TOKEN_ATTR_CONTROL | BRISK_TOKEN_ATTR_UNKNOWN | BRISK_TOKEN_ATTR_BYTE));
}

/* A unit no merged token covers: its own token, its bytes, or unknown. */
static brisk_status emit_unit(tok_ctx *c, const brisk_unit *u) {
  const brisk_vocab *v = c->v;
  if (emittable(v, u->id)) return stage(c, u->id);
  if (v->byte_fallback) {
    /* The unit's text as the vocabulary spells it (U+2581 for a space). */
    const char *p = u->id >= 0 ? brisk_strtab_str(&v->strs, u->id) : u->p;
    size_t n = u->id >= 0 ? v->strs.len[u->id] : u->len;
    bool all = true;
    for (size_t i = 0; i < n; i++) all = all && v->byte_tok[(uint8_t)p[i]] >= 0;
    if (all) {
      brisk_status st = BRISK_OK;
      for (size_t i = 0; i < n && st == BRISK_OK; i++) st = stage(c, v->byte_tok[(uint8_t)p[i]]);
      return st;
    }
  }
  return emit_unk(c, u->id >= 0 ? brisk_strtab_str(&v->strs, u->id) : u->p,
                  u->id >= 0 ? v->strs.len[u->id] : u->len);
}

static uint64_t ids_hash(const brisk_unit *u, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint32_t)u[i].id;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  return h | 1; /* never 0, which marks an empty slot */
}

static cache_slot *cache_find(tok_ctx *c, uint64_t h, bool *hit) {
  size_t mask = c->n_slots - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    cache_slot *s = &c->slots[i];
    *hit = false;
    if (s->hash == 0) return s;
    if (s->hash != h || s->n_key != c->n_units) continue;
    bool same = true;
    for (size_t k = 0; k < c->n_units && same; k++) same = c->pool[s->off + k] == c->units[k].id;
    if (same) {
      *hit = true;
      return s;
    }
  }
}

/* Doubles the slot table, reinserting every entry (hashes are stored). */
static brisk_status cache_grow_slots(tok_ctx *c) {
  size_t n = c->n_slots * 2;
  cache_slot *slots = brisk_calloc(n, sizeof *slots);
  if (!slots) return brisk_error_oom();
  for (size_t i = 0; i < c->n_slots; i++) {
    if (c->slots[i].hash == 0) continue;
    size_t j = (size_t)c->slots[i].hash & (n - 1);
    while (slots[j].hash) j = (j + 1) & (n - 1);
    slots[j] = c->slots[i];
  }
  brisk_free(c->slots);
  c->slots = slots;
  c->n_slots = n;
  return BRISK_OK;
}

/* Remembers the staged tokens for the current units. The cache grows while
 * under its limits and is dropped whole when full (simple, and bounded). */
static brisk_status cache_store(tok_ctx *c, uint64_t h, cache_slot *slot) {
  size_t need = c->n_units + c->n_stage;
  if (c->n_stage > UINT16_MAX) return BRISK_OK;
  bool hit, moved = false;
  if (c->n_cached * 2 >= c->n_slots && c->n_slots < CACHE_SLOTS) {
    brisk_status st = cache_grow_slots(c);
    if (st) return st;
    moved = true;
  }
  while (c->pool_n + need > c->pool_cap && c->pool_cap < CACHE_POOL) {
    size_t cap = c->pool_cap ? c->pool_cap * 2 : CACHE_POOL_MIN;
    int32_t *pool = brisk_realloc(c->pool, cap * sizeof *pool);
    if (!pool) return brisk_error_oom();
    c->pool = pool;
    c->pool_cap = cap;
  }
  if (c->n_cached * 2 >= c->n_slots || c->pool_n + need > c->pool_cap) {
    memset(c->slots, 0, c->n_slots * sizeof *c->slots);
    c->pool_n = 0, c->n_cached = 0;
    moved = true;
  }
  if (moved) slot = cache_find(c, h, &hit);
  int32_t *o = c->pool + c->pool_n;
  for (size_t k = 0; k < c->n_units; k++) o[k] = c->units[k].id;
  memcpy(o + c->n_units, c->stage, c->n_stage * sizeof *o);
  *slot = (cache_slot){h, (uint32_t)c->pool_n, (uint16_t)c->n_units, (uint16_t)c->n_stage};
  c->pool_n += need;
  c->n_cached++;
  return BRISK_OK;
}

static brisk_status flush_chunk(tok_ctx *c) {
  if (c->n_units == 0) return BRISK_OK;
  /* Cacheable when the output depends on the unit ids alone. */
  bool cacheable = c->n_units <= CACHE_MAX_UNITS;
  for (size_t k = 0; k < c->n_units && cacheable; k++) cacheable = c->units[k].id >= 0;
  uint64_t h = 0;
  cache_slot *slot = NULL;
  if (cacheable) {
    if (!c->slots) {
      c->slots = brisk_calloc(CACHE_SLOTS_MIN, sizeof *c->slots);
      if (!c->slots) return brisk_error_oom();
      c->n_slots = CACHE_SLOTS_MIN;
    }
    h = ids_hash(c->units, c->n_units);
    bool hit;
    slot = cache_find(c, h, &hit);
    if (hit) {
      const int32_t *val = c->pool + slot->off + slot->n_key;
      for (size_t k = 0; k < slot->n_val; k++) emit(c, val[k]);
      c->n_units = 0;
      return BRISK_OK;
    }
  }
  brisk_status st = brisk_merge_run(c->v, &c->mw, c->units, c->n_units);
  if (st != BRISK_OK) return st;
  size_t unk0 = c->n_unk;
  c->n_stage = 0;
  for (int32_t i = 0; i >= 0 && st == BRISK_OK; i = c->mw.syms[i].next) {
    const brisk_sym *s = &c->mw.syms[i];
    if (emittable(c->v, s->id)) {
      st = stage(c, s->id);
    } else {
      for (uint32_t k = 0; k < s->nu && st == BRISK_OK; k++)
        st = emit_unit(c, &c->units[s->u0 + k]);
    }
  }
  if (st != BRISK_OK) return st;
  bool was_unk = c->last_unk;
  for (size_t k = 0; k < c->n_stage; k++) emit(c, c->stage[k]);
  c->last_unk = was_unk;
  if (cacheable && c->n_unk == unk0) st = cache_store(c, h, slot);
  c->n_units = 0;
  return st;
}

/* Adds a unit, first closing the chunk where no merge can cross. */
static brisk_status add_unit(tok_ctx *c, const char *p, size_t len, int32_t id) {
  if (c->n_units > 0) {
    const brisk_unit *prev = &c->units[c->n_units - 1];
    bool cut;
    if (prev->len == 1 && len == 1) {
      unsigned a = (uint8_t)prev->p[0], b = (uint8_t)p[0];
      cut = (c->v->cut[(a * 256 + b) >> 3] >> (b & 7)) & 1;
    } else {
      cut = brisk_merge_can_cut(c->v, prev->id, id);
    }
    if (c->n_units >= BRISK_TOKENIZER_MAX_CHUNK || cut) {
      brisk_status st = flush_chunk(c);
      if (st != BRISK_OK) return st;
    }
  }
  if (brisk_grow((void **)&c->units, &c->units_cap, c->n_units + 1, sizeof *c->units) != 0)
    return brisk_error_oom();
  c->units[c->n_units++] = (brisk_unit){p, (uint32_t)len, id};
  return BRISK_OK;
}

/* The intern id of the character unit at s (U+2581 for an escaped space). */
static inline int32_t char_unit_id(const brisk_vocab *v, const char *s, size_t k) {
  if (k == 1) return v->byte_unit[(uint8_t)s[0]];
  return brisk_strtab_find(&v->strs, s, k);
}

/* Whole-word lookup (ignore_merges): true if the word was one token. */
static brisk_status whole_word(tok_ctx *c, const char *s, size_t n, bool *done) {
  const brisk_vocab *v = c->v;
  *done = false;
  if (n > v->max_token_len) return BRISK_OK;
  const char *w = s;
  size_t wn = n;
  if (v->byte_level) {
    if (brisk_grow((void **)&c->enc, &c->enc_cap, 2 * n, 1) != 0) return brisk_error_oom();
    wn = 0;
    for (size_t i = 0; i < n; i++)
      wn += brisk_utf8_encode(brisk_byte_to_cp((uint8_t)s[i]), c->enc + wn);
    w = c->enc;
  }
  int32_t id = brisk_strtab_find(&v->strs, w, wn);
  if (emittable(v, id)) {
    emit(c, id);
    *done = true;
  }
  return BRISK_OK;
}

/* True if s[0, n) is all '\n'. */
static bool all_newlines(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != '\n') return false;
  return true;
}

static brisk_status process_word(void *ctx, const char *s, size_t n) {
  tok_ctx *c = ctx;
  const brisk_vocab *v = c->v;
  brisk_status st;
  bool nl_word = v->newline_words && n > 0 && all_newlines(s, n);
  if (v->ignore_merges || nl_word) {
    bool done;
    st = whole_word(c, s, n, &done);
    if (st != BRISK_OK || done) return st;
  }
  const unsigned char *u = (const unsigned char *)s;
  if (v->byte_level) {
    for (size_t i = 0; i < n; i++) {
      st = add_unit(c, s + i, 1, v->byte_unit[u[i]]);
      if (st != BRISK_OK) return st;
    }
  } else {
    for (size_t i = 0; i < n;) {
      size_t k = brisk_utf8_unit(u + i, n - i);
      st = add_unit(c, s + i, k,
                    k == 1 ? v->byte_unit[u[i]] : brisk_strtab_find(&v->strs, s + i, k));
      if (st != BRISK_OK) return st;
      i += k;
    }
  }
  return flush_chunk(c);
}

/* Applies the normalization ops to a fragment; *out points at the result
 * (the input itself when nothing changed). */
static brisk_status too_long(size_t n, size_t limit) {
  return brisk_error(BRISK_E_UNSUPPORTED,
                     "tokenize: the tokenizer's normalizers grow a %zu-byte fragment past %zu "
                     "bytes (%d x its length + %d)",
                     n, limit, BRISK_NORM_MAX_GROWTH, BRISK_NORM_MAX_EXTRA);
}

static brisk_status normalize(tok_ctx *c, const char *s, size_t n, bool at_start, const char **out,
                              size_t *out_n) {
  const brisk_vocab *v = c->v;
  int cur = -1; /* which buffer holds the text, -1: the input */
  const char *t = s;
  size_t tn = n;
  /* Chained normalizers multiply: eight Replace("a" -> "aa") would turn one
   * byte into 256 and a page into a megabyte per op. Real ones grow text by
   * at most 3x (U+2581 for each space) plus a prefix. */
  size_t limit = n <= (SIZE_MAX - BRISK_NORM_MAX_EXTRA) / BRISK_NORM_MAX_GROWTH
                     ? n * BRISK_NORM_MAX_GROWTH + BRISK_NORM_MAX_EXTRA
                     : SIZE_MAX;
  for (size_t i = 0; i < v->n_norm; i++) {
    const brisk_norm_op *op = &v->norm[i];
    int dst = cur == 0 ? 1 : 0;
    if (op->kind == BRISK_NORM_REPLACE) {
      /* Count first, so that the output is sized once. */
      size_t hits = 0;
      for (size_t j = 0; op->from_len && j + op->from_len <= tn;) {
        if (memcmp(t + j, op->from, op->from_len) == 0) {
          hits++;
          j += op->from_len;
        } else {
          j++;
        }
      }
      if (hits == 0) continue;
      size_t need = tn - hits * op->from_len; /* hits * from_len <= tn */
      if (op->to_len && hits > (limit - need) / op->to_len) return too_long(n, limit);
      need += hits * op->to_len;
      if (brisk_grow((void **)&c->norm[dst], &c->norm_cap[dst], need ? need : 1, 1) != 0)
        return brisk_error_oom();
      char *o = c->norm[dst];
      size_t k = 0;
      for (size_t j = 0; j < tn;) {
        if (j + op->from_len <= tn && memcmp(t + j, op->from, op->from_len) == 0) {
          memcpy(o + k, op->to, op->to_len);
          k += op->to_len;
          j += op->from_len;
        } else {
          o[k++] = t[j++];
        }
      }
      t = o, tn = k, cur = dst;
    } else {
      bool starts = tn >= op->to_len && memcmp(t, op->to, op->to_len) == 0;
      bool apply = tn > 0;
      if (op->kind == BRISK_NORM_PREPEND_FIRST) apply = apply && at_start && !starts;
      if (op->kind == BRISK_NORM_PREPEND_UNLESS) apply = apply && !starts;
      if (!apply) continue;
      if (op->to_len > limit - tn) return too_long(n, limit);
      if (brisk_grow((void **)&c->norm[dst], &c->norm_cap[dst], tn + op->to_len, 1) != 0)
        return brisk_error_oom();
      memcpy(c->norm[dst], op->to, op->to_len);
      memmove(c->norm[dst] + op->to_len, t, tn);
      t = c->norm[dst], tn += op->to_len, cur = dst;
    }
  }
  *out = t;
  *out_n = tn;
  return BRISK_OK;
}

static brisk_status process_text(tok_ctx *c, const char *s, size_t n, bool after_special,
                                 bool at_start) {
  const brisk_vocab *v = c->v;
  brisk_status st;
  if (v->type == BRISK_VOCAB_SPM) {
    /* SPM treats the fragment as one word, with U+2581 for spaces. */
    if (v->add_space_prefix && after_special) {
      st = add_unit(c, " ", 1, v->space_unit);
      if (st != BRISK_OK) return st;
    }
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
      size_t k = brisk_utf8_unit(u + i, n - i);
      st = add_unit(c, s + i, k, char_unit_id(v, s + i, k));
      if (st != BRISK_OK) return st;
      i += k;
    }
    return flush_chunk(c);
  }
  const char *t = s;
  size_t tn = n;
  st = normalize(c, s, n, at_start, &t, &tn);
  if (st != BRISK_OK) return st;
  if (v->pre) return brisk_pretok_run(v->pre, c->pws, t, tn, process_word, c);
  return tn ? process_word(c, t, tn) : BRISK_OK;
}

static inline bool is_space(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static brisk_status run(tok_ctx *c, const char *s, size_t n, bool add_special, bool parse_special) {
  const brisk_vocab *v = c->v;
  brisk_status st = BRISK_OK;
  if (add_special && brisk_vocab_adds_bos(v)) emit(c, v->special[BRISK_VOCAB_BOS]);
  size_t pos = 0, frag = 0;
  bool after_special = true;
  while (pos < n) {
    size_t mlen = 0;
    int32_t id = brisk_vocab_match_special(v, s + pos, n - pos, parse_special, &mlen);
    if (id < 0) {
      pos++;
      continue;
    }
    size_t fend = pos;
    if (v->attrs[id] & BRISK_TOKEN_ATTR_LSTRIP)
      while (fend > frag && is_space(s[fend - 1])) fend--;
    if (fend > frag) {
      st = process_text(c, s + frag, fend - frag, after_special, frag == 0);
      if (st != BRISK_OK) return st;
    }
    emit(c, id);
    after_special = true;
    pos += mlen;
    if (v->attrs[id] & BRISK_TOKEN_ATTR_RSTRIP)
      while (pos < n && is_space(s[pos])) pos++;
    frag = pos;
  }
  if (n > frag) st = process_text(c, s + frag, n - frag, after_special, frag == 0);
  if (st == BRISK_OK && add_special && brisk_vocab_adds_eos(v))
    emit(c, v->special[BRISK_VOCAB_EOS]);
  return st;
}

brisk_status brisk_vocab_tokenize(const brisk_vocab *v, const char *text, size_t len,
                                  bool add_special, bool parse_special, int32_t *tokens,
                                  size_t capacity, size_t *n_needed) {
  if (!v || !n_needed || (!text && len) || (!tokens && capacity))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "tokenize: NULL argument (vocab %p, text %p with length %zu, tokens %p "
                       "with capacity %zu, n_needed %p)",
                       (const void *)v, (const void *)text, len, (void *)tokens, capacity,
                       (void *)n_needed);
  tok_ctx c;
  memset(&c, 0, sizeof c);
  c.v = v;
  c.out = tokens;
  c.cap = capacity;
  brisk_status st = BRISK_OK;
  if (v->pre) st = brisk_pretok_ws_create(v->pre, &c.pws);
  if (st == BRISK_OK) st = run(&c, text ? text : "", len, add_special, parse_special);
  brisk_merge_ws_free(&c.mw);
  brisk_free(c.units);
  brisk_free(c.enc);
  brisk_free(c.norm[0]);
  brisk_free(c.norm[1]);
  brisk_pretok_ws_free(c.pws);
  brisk_free(c.stage);
  brisk_free(c.slots);
  brisk_free(c.pool);
  if (st != BRISK_OK) return st;
  *n_needed = c.n;
  if (c.n > capacity)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "tokenize: %zu tokens do not fit in %zu", c.n,
                       capacity);
  return BRISK_OK;
}
