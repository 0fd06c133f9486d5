#include "tokenizer/merge.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void brisk_merge_ws_free(brisk_merge_ws *ws) {
  brisk_free(ws->syms);
  brisk_free(ws->heap);
  memset(ws, 0, sizeof *ws);
}

static bool ent_less(const brisk_merge_ent *a, const brisk_merge_ent *b) {
  return a->cost < b->cost || (a->cost == b->cost && a->left < b->left);
}

static brisk_status heap_push(brisk_merge_ws *ws, const brisk_merge_ent *e) {
  if (brisk_grow((void **)&ws->heap, &ws->heap_cap, ws->heap_n + 1, sizeof *ws->heap) != 0)
    return brisk_error_oom();
  size_t i = ws->heap_n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!ent_less(e, &ws->heap[parent])) break;
    ws->heap[i] = ws->heap[parent];
    i = parent;
  }
  ws->heap[i] = *e;
  return BRISK_OK;
}

static brisk_merge_ent heap_pop(brisk_merge_ws *ws) {
  brisk_merge_ent top = ws->heap[0];
  brisk_merge_ent last = ws->heap[--ws->heap_n];
  size_t i = 0, n = ws->heap_n;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && ent_less(&ws->heap[c + 1], &ws->heap[c])) c++;
    if (!ent_less(&ws->heap[c], &last)) break;
    ws->heap[i] = ws->heap[c];
    i = c;
  }
  if (n) ws->heap[i] = last;
  return top;
}

static brisk_status try_pair(const brisk_vocab *v, brisk_merge_ws *ws, int32_t l, int32_t r) {
  if (l < 0 || r < 0) return BRISK_OK;
  int32_t lid = ws->syms[l].id, rid = ws->syms[r].id;
  if (lid < 0 || rid < 0) return BRISK_OK;
  int32_t e = brisk_u64map_get(&v->pairs, brisk_pair_key(lid, rid));
  if (e < 0) return BRISK_OK;
  brisk_merge_ent ent = {v->pair_cost[e], l, r, lid, rid, v->pair_result[e]};
  return heap_push(ws, &ent);
}

brisk_status brisk_merge_run(const brisk_vocab *v, brisk_merge_ws *ws, const brisk_unit *units,
                             size_t n) {
  if (brisk_grow((void **)&ws->syms, &ws->syms_cap, n, sizeof *ws->syms) != 0)
    return brisk_error_oom();
  brisk_sym *s = ws->syms;
  for (size_t i = 0; i < n; i++) {
    s[i].id = units[i].id;
    s[i].prev = (int32_t)i - 1;
    s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    s[i].u0 = (uint32_t)i;
    s[i].nu = 1;
  }
  ws->heap_n = 0;
  brisk_status st = BRISK_OK;
  for (size_t i = 1; i < n && st == BRISK_OK; i++) st = try_pair(v, ws, (int32_t)i - 1, (int32_t)i);
  while (st == BRISK_OK && ws->heap_n > 0) {
    brisk_merge_ent e = heap_pop(ws);
    brisk_sym *l = &s[e.left], *r = &s[e.right];
    if (l->nu == 0 || r->nu == 0 || l->next != e.right || l->id != e.lid || r->id != e.rid)
      continue; /* stale: one side was merged since */
    l->id = e.result;
    l->nu += r->nu;
    r->nu = 0;
    l->next = r->next;
    if (r->next >= 0) s[r->next].prev = e.left;
    st = try_pair(v, ws, l->prev, e.left);
    if (st == BRISK_OK) st = try_pair(v, ws, e.left, l->next);
  }
  return st;
}

/* ---- Building the tables ---- */

/* Intern ids of the first and last unit of a string (not in the pool). */
static brisk_status edge_units(brisk_vocab *v, const char *s, size_t n, int32_t *first,
                               int32_t *last) {
  const unsigned char *u = (const unsigned char *)s;
  size_t k = brisk_utf8_unit(u, n), j = 0;
  for (size_t i = 0; i < n; i += brisk_utf8_unit(u + i, n - i)) j = i;
  brisk_status st = brisk_strtab_intern(&v->strs, s, k, first);
  if (st != BRISK_OK) return st;
  return brisk_strtab_intern(&v->strs, s + j, n - j, last);
}

static brisk_status add_pair(brisk_vocab *v, int32_t a, int32_t b, uint32_t cost, int32_t result,
                             const char *ls, size_t ln, const char *rs, size_t rn) {
  uint64_t key = brisk_pair_key(a, b);
  if (brisk_u64map_get(&v->pairs, key) >= 0) return BRISK_OK; /* the first (cheapest) wins */
  size_t e = v->n_pairs;
  brisk_status st = brisk_u64map_put(&v->pairs, key, (int32_t)e, true);
  if (st != BRISK_OK) return st;
  v->pair_cost[e] = cost;
  v->pair_result[e] = result;
  v->n_pairs++;
  int32_t lf, ll, rf, rl;
  st = edge_units(v, ls, ln, &lf, &ll);
  if (st == BRISK_OK) st = edge_units(v, rs, rn, &rf, &rl);
  if (st == BRISK_OK) st = brisk_u64map_put(&v->junctions, brisk_pair_key(ll, rf), 1, true);
  return st;
}

static brisk_status alloc_pairs(brisk_vocab *v, size_t n) {
  v->pair_cost = brisk_malloc((n ? n : 1) * sizeof *v->pair_cost);
  v->pair_result = brisk_malloc((n ? n : 1) * sizeof *v->pair_result);
  if (!v->pair_cost || !v->pair_result) return brisk_error_oom();
  return BRISK_OK;
}

static brisk_status build_bpe(brisk_vocab *v, const brisk_vocab_desc *d) {
  if (d->n_merges > (1u << 30))
    return brisk_error(BRISK_E_FORMAT, "tokenizer: %zu merges is too many", d->n_merges);
  brisk_status st = alloc_pairs(v, d->n_merges);
  char *joined = NULL;
  size_t joined_cap = 0;
  for (size_t i = 0; i < d->n_merges && st == BRISK_OK; i++) {
    const brisk_vocab_str *l = &d->merge_left[i], *r = &d->merge_right[i];
    if (l->len == 0 || r->len == 0) continue; /* malformed entry: never applies */
    if (brisk_grow((void **)&joined, &joined_cap, l->len + r->len, 1) != 0) {
      st = brisk_error_oom();
      break;
    }
    memcpy(joined, l->ptr, l->len);
    memcpy(joined + l->len, r->ptr, r->len);
    int32_t a, b, res;
    st = brisk_strtab_intern(&v->strs, l->ptr, l->len, &a);
    if (st == BRISK_OK) st = brisk_strtab_intern(&v->strs, r->ptr, r->len, &b);
    if (st == BRISK_OK) st = brisk_strtab_intern(&v->strs, joined, l->len + r->len, &res);
    if (st == BRISK_OK) st = add_pair(v, a, b, (uint32_t)i, res, l->ptr, l->len, r->ptr, r->len);
  }
  brisk_free(joined);
  return st;
}

typedef struct score_id {
  float score;
  int32_t id;
} score_id;

static int cmp_score_desc(const void *pa, const void *pb) {
  const score_id *a = pa, *b = pb;
  if (a->score > b->score) return -1;
  if (a->score < b->score) return 1;
  return (a->id > b->id) - (a->id < b->id);
}

/* SPM: a pair of symbols merges into token t when their texts join to t's
 * text; the higher t's score, the earlier. Every split of every mergeable
 * token into two reachable symbols (a single unit, or itself a mergeable
 * token) is a pair. */
static brisk_status build_spm(brisk_vocab *v) {
  size_t n = (size_t)v->n_tokens;
  score_id *order = brisk_malloc(n * sizeof *order);
  uint32_t *cost = brisk_malloc(n * sizeof *cost);
  brisk_status st = BRISK_OK;
  if (!order || !cost) {
    st = brisk_error_oom();
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    float s = v->scores[i];
    order[i].score = isnan(s) ? -INFINITY : s;
    order[i].id = (int32_t)i;
  }
  qsort(order, n, sizeof *order, cmp_score_desc);
  for (size_t i = 0, rank = 0; i < n; i++) {
    if (i > 0 && order[i].score != order[i - 1].score) rank++;
    cost[order[i].id] = (uint32_t)rank;
  }
  size_t n_splits = 0;
  for (size_t t = 0; t < n; t++) {
    size_t len = v->strs.len[t];
    n_splits += len > 1 ? len - 1 : 0;
  }
  st = alloc_pairs(v, n_splits);
  char *buf = NULL; /* the token's text: interning may move the pool */
  size_t buf_cap = 0;
  for (int32_t t = 0; t < v->n_tokens && st == BRISK_OK; t++) {
    if (!(v->attrs[t] & BRISK_TOKEN_ATTR_NORMAL)) continue;
    size_t len = v->strs.len[t];
    if (len < 2) continue;
    if (brisk_grow((void **)&buf, &buf_cap, len, 1) != 0) {
      st = brisk_error_oom();
      break;
    }
    memcpy(buf, brisk_strtab_str(&v->strs, t), len);
    const unsigned char *u = (const unsigned char *)buf;
    size_t first = brisk_utf8_unit(u, len);
    for (size_t j = first; j < len && st == BRISK_OK; j += brisk_utf8_unit(u + j, len - j)) {
      int32_t a, b;
      if (j == first) {
        st = brisk_strtab_intern(&v->strs, buf, j, &a);
      } else {
        a = brisk_strtab_find(&v->strs, buf, j);
        if (a < 0 || a >= v->n_tokens || !(v->attrs[a] & BRISK_TOKEN_ATTR_NORMAL)) a = -1;
      }
      if (st != BRISK_OK) break;
      if (brisk_utf8_unit(u + j, len - j) == len - j) {
        st = brisk_strtab_intern(&v->strs, buf + j, len - j, &b);
      } else {
        b = brisk_strtab_find(&v->strs, buf + j, len - j);
        if (b < 0 || b >= v->n_tokens || !(v->attrs[b] & BRISK_TOKEN_ATTR_NORMAL)) b = -1;
      }
      if (st == BRISK_OK && a >= 0 && b >= 0)
        st = add_pair(v, a, b, cost[t], t, buf, j, buf + j, len - j);
    }
  }
  brisk_free(buf);
done:
  brisk_free(order);
  brisk_free(cost);
  return st;
}

brisk_status brisk_vocab_build_merges(brisk_vocab *v, const brisk_vocab_desc *d) {
  brisk_status st;
  if (v->type == BRISK_VOCAB_SPM) {
    st = build_spm(v);
  } else {
    st = build_bpe(v, d);
  }
  if (st != BRISK_OK) return st;
  if (v->escape_spaces) {
    st = brisk_strtab_intern(&v->strs, "\xE2\x96\x81", 3, &v->space_unit);
    if (st != BRISK_OK) return st;
  }
  if (v->byte_level) {
    for (int b = 0; b < 256; b++) {
      char u[4];
      size_t k = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)b), u);
      st = brisk_strtab_intern(&v->strs, u, k, &v->bl_unit[b]);
      if (st != BRISK_OK) return st;
    }
  }
  /* One-byte units: their ids and where words may be cut between two of
   * them, as tables (the hot path of every tokenization). */
  for (int b = 0; b < 256; b++) {
    char ch = (char)b;
    if (v->byte_level)
      v->byte_unit[b] = v->bl_unit[b];
    else if (v->type == BRISK_VOCAB_SPM && v->escape_spaces && b == ' ')
      v->byte_unit[b] = v->space_unit;
    else
      v->byte_unit[b] = brisk_strtab_find(&v->strs, &ch, 1);
  }
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++)
      if (brisk_merge_can_cut(v, v->byte_unit[a], v->byte_unit[b]))
        v->cut[(a * 256 + b) >> 3] |= (uint8_t)(1u << (b & 7));
  return BRISK_OK;
}
