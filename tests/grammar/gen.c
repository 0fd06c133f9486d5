#include "gen.h"

#include <stdlib.h>
#include <string.h>

uint64_t gen_rand(gen_ctx *G) {
  uint64_t z = (G->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint32_t alt_len(const gen_ctx *G, uint32_t i) {
  const brisk_grammar *g = G->g;
  uint64_t n = 0;
  for (; g->elems[i].type != GR_ALT && g->elems[i].type != GR_END; i++)
    n += g->elems[i].type == GR_SET ? 1 : G->minlen[g->elems[i].value];
  return n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)n;
}

int gen_init(gen_ctx *G, const brisk_grammar *g, uint64_t seed) {
  memset(G, 0, sizeof *G);
  G->g = g;
  G->rng = seed;
  G->minlen = malloc((g->n_rules + 1) * sizeof *G->minlen);
  if (!G->minlen) return -1;
  for (size_t r = 0; r < g->n_rules; r++) G->minlen[r] = UINT32_MAX / 2;
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t r = 0; r < g->n_rules; r++)
      for (uint32_t i = g->rule_start[r];;) {
        uint32_t l = alt_len(G, i);
        if (l < G->minlen[r]) {
          G->minlen[r] = l;
          changed = 1;
        }
        while (g->elems[i].type != GR_ALT && g->elems[i].type != GR_END) i++;
        if (g->elems[i].type == GR_END) break;
        i++;
      }
  }
  return 0;
}

void gen_release(gen_ctx *G) {
  free(G->minlen);
  free(G->out);
  memset(G, 0, sizeof *G);
}

static int put(gen_ctx *G, uint32_t cp) {
  if (G->n + 5 > G->cap) {
    size_t cap = G->cap ? 2 * G->cap : 256;
    char *o = realloc(G->out, cap);
    if (!o) return -1;
    G->out = o;
    G->cap = cap;
  }
  char *o = G->out + G->n;
  if (cp < 0x80) {
    o[0] = (char)cp;
    G->n += 1;
  } else if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    G->n += 2;
  } else if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    G->n += 3;
  } else {
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    G->n += 4;
  }
  return 0;
}

/* A random character of set s: mostly printable ASCII when it has some. */
static uint32_t pick(gen_ctx *G, uint32_t s) {
  const brisk_grammar *g = G->g;
  uint32_t a = g->set_start[s], b = g->set_start[s + 1];
  for (int tries = 0; tries < 64; tries++) {
    const gr_range *r = &g->ranges[a + gen_rand(G) % (b - a)];
    uint32_t hi = r->hi;
    if (gen_rand(G) % 8 != 0 && r->lo < 0x7F && hi > 0x7E) hi = 0x7E;
    uint32_t cp = r->lo + (uint32_t)(gen_rand(G) % ((uint64_t)hi - r->lo + 1));
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (gen_rand(G) % 8 != 0 && cp < 0x20 && hi > 0x20) continue;
    return cp;
  }
  return g->ranges[a].lo >= 0xD800 && g->ranges[a].lo <= 0xDFFF ? 0xE000 : g->ranges[a].lo;
}

static uint32_t next_alt(const brisk_grammar *g, uint32_t i) {
  while (g->elems[i].type != GR_ALT && g->elems[i].type != GR_END) i++;
  return g->elems[i].type == GR_END ? UINT32_MAX : i + 1;
}

static int derive(gen_ctx *G, uint32_t r) {
  const brisk_grammar *g = G->g;
  uint32_t n = 0;
  for (uint32_t i = g->rule_start[r]; i != UINT32_MAX; i = next_alt(g, i)) n++;
  uint32_t i = g->rule_start[r];
  if (G->n < G->budget) {
    for (uint64_t k = gen_rand(G) % n; k > 0; k--) i = next_alt(g, i);
  } else {
    for (uint32_t j = next_alt(g, i); j != UINT32_MAX; j = next_alt(g, j))
      if (alt_len(G, j) < alt_len(G, i)) i = j;
  }
  for (; g->elems[i].type != GR_ALT && g->elems[i].type != GR_END; i++) {
    const gr_elem *e = &g->elems[i];
    if (e->type == GR_SET ? put(G, pick(G, e->value)) : derive(G, e->value)) return -1;
  }
  return 0;
}

const char *gen_string(gen_ctx *G, size_t budget, size_t *n) {
  G->n = 0;
  G->budget = budget;
  if (put(G, 0)) return NULL;
  G->n = 0;
  if (derive(G, G->g->root)) return NULL;
  G->out[G->n] = 0;
  *n = G->n;
  return G->out;
}
