/* The pushdown matcher: interned parse stacks and their successors.
 *
 * A node (pos, parent) means "match from element pos to the end of its
 * alternative, then go on with parent". Expanding a node replaces a rule
 * reference at pos by the first element of each of the rule's alternatives
 * (the reference's continuation becomes their parent; when the reference
 * ends its alternative the continuation is the parent itself, so right
 * recursion such as x* does not grow the stack) until every node of the
 * set stands at a character set, or is node 0, the finished stack.
 *
 * After a node's set takes a code point, what follows depends only on the
 * node, so each node's successors are computed once and kept (succ): a
 * step is then a set lookup and a copy per node. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static uint64_t node_hash(int32_t pos, int32_t parent) {
  uint64_t h = (uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull ^ (uint32_t)parent;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ h >> 32;
}

static int set_err(gr_matcher *m, brisk_status st) {
  if (!m->err) m->err = st;
  return -1;
}

static int grow_table(gr_matcher *m) {
  size_t cap = m->table_cap ? 2 * m->table_cap : 1024;
  int32_t *t = brisk_malloc(cap * sizeof *t);
  if (!t) return set_err(m, brisk_error_oom());
  memset(t, 0xFF, cap * sizeof *t);
  for (size_t i = GR_FIRST_NODE; i < m->n_nodes; i++) {
    size_t h = (size_t)node_hash(m->nodes[i].pos, m->nodes[i].parent) & (cap - 1);
    while (t[h] >= 0) h = (h + 1) & (cap - 1);
    t[h] = (int32_t)i;
  }
  brisk_free(m->table);
  m->table = t;
  m->table_cap = cap;
  return 0;
}

/* The id of node (pos, parent), made if new; -1 on failure. */
static int32_t intern(gr_matcher *m, int32_t pos, int32_t parent) {
  if (2 * (m->n_nodes + 1) > m->table_cap && grow_table(m)) return -1;
  size_t h = (size_t)node_hash(pos, parent) & (m->table_cap - 1);
  for (int32_t id; (id = m->table[h]) >= 0; h = (h + 1) & (m->table_cap - 1))
    if (m->nodes[id].pos == pos && m->nodes[id].parent == parent) return id;
  if (m->n_nodes >= GR_MAX_NODES)
    return set_err(m, brisk_error(BRISK_E_INVALID_ARGUMENT,
                                  "grammar: the constraint's parse stacks exceed %d nodes (the "
                                  "grammar is too ambiguous or the output nests too deeply)",
                                  GR_MAX_NODES));
  if (m->n_nodes == m->cap_nodes) {
    size_t cap = m->cap_nodes ? 2 * m->cap_nodes : 256;
    gr_node *nodes = brisk_realloc(m->nodes, cap * sizeof *nodes);
    if (nodes) m->nodes = nodes;
    int32_t *off = nodes ? brisk_realloc(m->succ_off, cap * sizeof *off) : NULL;
    if (off) m->succ_off = off;
    int32_t *len = off ? brisk_realloc(m->succ_len, cap * sizeof *len) : NULL;
    if (len) m->succ_len = len;
    uint32_t *mark = len ? brisk_realloc(m->mark, cap * sizeof *mark) : NULL;
    if (mark) m->mark = mark;
    if (!mark) return set_err(m, brisk_error_oom());
    memset(m->mark + m->cap_nodes, 0, (cap - m->cap_nodes) * sizeof *mark);
    m->cap_nodes = cap;
  }
  int32_t id = (int32_t)m->n_nodes++;
  m->nodes[id] = (gr_node){pos, parent};
  m->succ_off[id] = -1;
  m->succ_len[id] = 0;
  m->table[h] = id;
  return id;
}

int32_t gr_node_id(gr_matcher *m, int32_t pos, int32_t parent) { return intern(m, pos, parent); }

/* Appends node id to tmp unless this round's stamp has it. */
static int add_tmp(gr_matcher *m, int32_t id) {
  if (m->mark[id] == m->stamp) return 0;
  m->mark[id] = m->stamp;
  if (m->n_tmp >= GR_MAX_SET)
    return set_err(m, brisk_error(BRISK_E_INVALID_ARGUMENT,
                                  "grammar: a state of the constraint has more than %d parse "
                                  "stacks (the grammar is too ambiguous)",
                                  GR_MAX_SET));
  if (brisk_grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, sizeof *m->tmp))
    return set_err(m, brisk_error_oom());
  m->tmp[m->n_tmp++] = id;
  return 0;
}

/* Expands "match from pos, then parent" into tmp. Recursion depth is
 * bounded: without left recursion, a chain of references without a
 * character in between is at most the number of rules long, and popping
 * goes one level per finished rule. */
static int expand(gr_matcher *m, int32_t pos, int32_t parent) {
  const brisk_grammar *g = m->g;
  const gr_elem *e = &g->elems[pos];
  if (e->type == GR_SET) {
    int32_t id = intern(m, pos, parent);
    return id < 0 ? -1 : add_tmp(m, id);
  }
  if (e->type == GR_END || e->type == GR_ALT) {
    if (parent == 0 || parent == GR_SENT) return add_tmp(m, parent);
    gr_node up = m->nodes[parent];
    return expand(m, up.pos, up.parent);
  }
  /* GR_REF */
  uint32_t after = g->elems[pos + 1].type;
  int32_t ret = parent;
  if (after != GR_END && after != GR_ALT && (ret = intern(m, pos + 1, parent)) < 0) return -1;
  for (uint32_t i = g->rule_start[e->value];;) {
    if (expand(m, (int32_t)i, ret)) return -1;
    while (g->elems[i].type != GR_ALT && g->elems[i].type != GR_END) i++;
    if (g->elems[i].type == GR_END) break;
    i++;
  }
  return 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static void begin(gr_matcher *m) {
  m->n_tmp = 0;
  if (++m->stamp == 0) { /* wrapped: forget every old mark */
    memset(m->mark, 0, m->cap_nodes * sizeof *m->mark);
    m->stamp = 1;
  }
}

/* Node n's successors once its set took a character, computed once. */
static int successors(gr_matcher *m, int32_t n) {
  if (m->succ_off[n] >= 0) return 0;
  begin(m);
  gr_node x = m->nodes[n];
  if (expand(m, x.pos + 1, x.parent)) return -1;
  /* Sorted, so that equal states are equal arrays. */
  if (m->n_tmp > 1) qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_i32);
  if (brisk_grow((void **)&m->succ, &m->cap_succ, m->n_succ + m->n_tmp, sizeof *m->succ))
    return set_err(m, brisk_error_oom());
  memcpy(m->succ + m->n_succ, m->tmp, m->n_tmp * sizeof *m->tmp);
  m->succ_off[n] = (int32_t)m->n_succ;
  m->succ_len[n] = (int32_t)m->n_tmp;
  m->n_succ += m->n_tmp;
  return 0;
}

int gr_successors(gr_matcher *m, int32_t n, const int32_t **out) {
  if (n < GR_FIRST_NODE) return 0;
  if (successors(m, n)) return -1;
  *out = m->succ + m->succ_off[n];
  return m->succ_len[n];
}

brisk_status gr_matcher_init(gr_matcher *m, const brisk_grammar *g) {
  memset(m, 0, sizeof *m);
  m->g = g;
  if (grow_table(m)) return m->err;
  m->n_nodes = 0;
  /* Node 0, the finished stack; never in the table. */
  m->cap_nodes = 256;
  m->nodes = brisk_malloc(m->cap_nodes * sizeof *m->nodes);
  m->succ_off = brisk_malloc(m->cap_nodes * sizeof *m->succ_off);
  m->succ_len = brisk_malloc(m->cap_nodes * sizeof *m->succ_len);
  m->mark = brisk_calloc(m->cap_nodes, sizeof *m->mark);
  if (!m->nodes || !m->succ_off || !m->succ_len || !m->mark) {
    gr_matcher_release(m);
    return brisk_error_oom();
  }
  m->nodes[0] = (gr_node){-1, 0};
  m->nodes[GR_SENT] = (gr_node){-2, 0};
  for (int i = 0; i < GR_FIRST_NODE; i++) {
    m->succ_off[i] = 0;
    m->succ_len[i] = 0;
  }
  m->n_nodes = GR_FIRST_NODE;
  begin(m);
  for (uint32_t i = g->rule_start[g->root];;) {
    if (expand(m, (int32_t)i, 0)) break;
    while (g->elems[i].type != GR_ALT && g->elems[i].type != GR_END) i++;
    if (g->elems[i].type == GR_END) break;
    i++;
  }
  if (!m->err) {
    if (m->n_tmp > 1) qsort(m->tmp, m->n_tmp, sizeof *m->tmp, cmp_i32);
    if (!(m->initial = brisk_malloc((m->n_tmp ? m->n_tmp : 1) * sizeof *m->initial)))
      set_err(m, brisk_error_oom());
  }
  if (m->err) {
    brisk_status st = m->err;
    gr_matcher_release(m);
    return st;
  }
  memcpy(m->initial, m->tmp, m->n_tmp * sizeof *m->tmp);
  m->n_initial = m->n_tmp;
  return BRISK_OK;
}

void gr_matcher_release(gr_matcher *m) {
  brisk_free(m->nodes);
  brisk_free(m->table);
  brisk_free(m->succ_off);
  brisk_free(m->succ_len);
  brisk_free(m->succ);
  brisk_free(m->mark);
  brisk_free(m->initial);
  brisk_free(m->tmp);
  memset(m, 0, sizeof *m);
}

int32_t gr_truncate(gr_matcher *m, int32_t n, int depth) {
  if (n < GR_FIRST_NODE) return n;
  if (depth > GR_MAX_CUT) depth = GR_MAX_CUT;
  int32_t pos[GR_MAX_CUT], x = n;
  int d = 0;
  for (; d < depth && x >= GR_FIRST_NODE; d++) {
    pos[d] = m->nodes[x].pos;
    x = m->nodes[x].parent;
  }
  if (x < GR_FIRST_NODE) return n; /* the whole stack is short enough: itself */
  int32_t r = GR_SENT;
  for (int i = d - 1; i >= 0 && r >= 0; i--) r = intern(m, pos[i], r);
  return r;
}

int gr_advance(gr_matcher *m, const int32_t *in, int n, uint32_t cp, int32_t *out) {
  const brisk_grammar *g = m->g;
  /* Successors first: computing them reuses tmp and the marks. */
  int any = 0;
  for (int i = 0; i < n; i++) {
    int32_t id = in[i];
    if (id < GR_FIRST_NODE || !gr_set_has(g, g->elems[m->nodes[id].pos].value, cp)) continue;
    if (successors(m, id)) return -1;
    any = 1;
  }
  if (!any) return 0;
  begin(m);
  int k = 0, sorted = 1;
  for (int i = 0; i < n; i++) {
    int32_t id = in[i];
    if (id < GR_FIRST_NODE || !gr_set_has(g, g->elems[m->nodes[id].pos].value, cp)) continue;
    const int32_t *s = m->succ + m->succ_off[id];
    for (int32_t j = 0; j < m->succ_len[id]; j++) {
      int32_t x = s[j];
      if (m->mark[x] == m->stamp) continue;
      m->mark[x] = m->stamp;
      if (k >= GR_MAX_SET)
        return set_err(m, brisk_error(BRISK_E_INVALID_ARGUMENT,
                                      "grammar: a state of the constraint has more than %d parse "
                                      "stacks (the grammar is too ambiguous)",
                                      GR_MAX_SET));
      if (k > 0 && x < out[k - 1]) sorted = 0;
      out[k++] = x;
    }
  }
  if (!sorted && k > 1) qsort(out, (size_t)k, sizeof *out, cmp_i32);
  return k;
}

int gr_can_take(const gr_matcher *m, const int32_t *in, int n, uint32_t lo, uint32_t hi) {
  for (int i = 0; i < n; i++)
    if (in[i] >= GR_FIRST_NODE &&
        gr_set_meets(m->g, m->g->elems[m->nodes[in[i]].pos].value, lo, hi))
      return 1;
  return 0;
}

int gr_utf8_step(gr_utf8 *u, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi) {
  if (u->rem == 0) {
    if (b < 0x80) {
      *cp = b;
      u->n = 0;
      return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      u->len = 2;
      u->acc = b & 0x1Fu;
    } else if (b >= 0xE0 && b <= 0xEF) {
      u->len = 3;
      u->acc = b & 0x0Fu;
    } else if (b >= 0xF0 && b <= 0xF4) {
      u->len = 4;
      u->acc = b & 0x07u;
    } else {
      return -1;
    }
    u->rem = (uint8_t)(u->len - 1);
    u->n = 1;
    u->byte[0] = b;
  } else {
    if ((b & 0xC0) != 0x80) return -1;
    u->acc = u->acc << 6 | (b & 0x3Fu);
    u->byte[u->n++] = b;
    if (--u->rem == 0) {
      uint32_t v = u->acc;
      if ((u->len == 3 && v < 0x800) || (u->len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
          (v >= 0xD800 && v <= 0xDFFF))
        return -1;
      *cp = v;
      u->n = 0;
      return 1;
    }
  }
  return gr_utf8_range(u, lo, hi) ? 0 : -1;
}

int gr_utf8_range(const gr_utf8 *u, uint32_t *lo, uint32_t *hi) {
  /* The characters this prefix can still become, clipped to valid ones. */
  uint32_t shift = 6u * u->rem;
  uint32_t a = u->acc << shift, z = a | ((1u << shift) - 1);
  uint32_t min = u->len == 2 ? 0x80 : u->len == 3 ? 0x800 : 0x10000;
  uint32_t max = u->len == 2 ? 0x7FF : u->len == 3 ? 0xFFFF : 0x10FFFF;
  if (a < min) a = min;
  if (z > max) z = max;
  if (u->len == 3) { /* surrogates are not characters */
    if (a >= 0xD800 && a <= 0xDFFF) a = 0xE000;
    if (z >= 0xD800 && z <= 0xDFFF) z = 0xD7FF;
  }
  if (a > z) return 0;
  *lo = a;
  *hi = z;
  return 1;
}

void gr_utf8_class(const gr_utf8 *u, gr_utf8 *rep) {
  /* After the second byte every continuation is valid; before it, E0, ED,
   * F0 and F4 restrict the next byte, the other lead bytes of a length do
   * not. */
  uint8_t b0 = u->byte[0], bytes[3] = {0x80, 0x80, 0x80};
  if (u->len == 2)
    bytes[0] = 0xC2;
  else if (u->len == 3)
    bytes[0] = u->n == 1 && (b0 == 0xE0 || b0 == 0xED) ? b0 : 0xE1;
  else
    bytes[0] = u->n == 1 && (b0 == 0xF0 || b0 == 0xF4) ? b0 : 0xF1;
  memset(rep, 0, sizeof *rep);
  uint32_t cp, lo, hi;
  for (int i = 0; i < u->n; i++) gr_utf8_step(rep, bytes[i], &cp, &lo, &hi);
}
