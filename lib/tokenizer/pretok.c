#include "tokenizer/pretok.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string.h>

typedef struct pretok_step {
  pcre2_code *re;
  brisk_split_behavior behavior;
  bool invert;
} pretok_step;

/* Backtracking steps one match may take. The pre-tokenizer patterns in use
 * need tens per match; a file's Split regex that backtracks exponentially
 * ("(a+)+$") gives up here, with an error, instead of hanging the caller. */
enum { MATCH_LIMIT = 100000 };

struct brisk_pretok {
  pcre2_general_context *gctx;
  pcre2_compile_context *cctx;
  pcre2_match_context *mctx;
  pretok_step *steps; /* [n_steps] */
  size_t n_steps, cap;
};

struct brisk_pretok_ws {
  pcre2_match_data **md; /* [n_steps] */
  size_t n;
};

/* PCRE2's own allocations go through brisk's allocator (JIT code pages are
 * mmap'ed by PCRE2 and are not counted). */
static void *pc_malloc(size_t size, void *ud) {
  (void)ud;
  return brisk_malloc(size);
}
static void pc_free(void *p, void *ud) {
  (void)ud;
  brisk_free(p);
}

brisk_status brisk_pretok_create(brisk_pretok **out) {
  brisk_pretok *p = brisk_calloc(1, sizeof *p);
  if (!p) return brisk_error_oom();
  p->gctx = pcre2_general_context_create(pc_malloc, pc_free, NULL);
  if (p->gctx) p->cctx = pcre2_compile_context_create(p->gctx);
  if (p->gctx) p->mctx = pcre2_match_context_create(p->gctx);
  if (p->mctx) pcre2_set_match_limit(p->mctx, MATCH_LIMIT);
  if (!p->gctx || !p->cctx || !p->mctx) {
    brisk_pretok_free(p);
    return brisk_error_oom();
  }
  *out = p;
  return BRISK_OK;
}

void brisk_pretok_free(brisk_pretok *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_steps; i++) pcre2_code_free(p->steps[i].re);
  brisk_free(p->steps);
  pcre2_compile_context_free(p->cctx);
  pcre2_match_context_free(p->mctx);
  pcre2_general_context_free(p->gctx);
  brisk_free(p);
}

size_t brisk_pretok_n_steps(const brisk_pretok *p) { return p->n_steps; }

brisk_status brisk_pretok_add(brisk_pretok *p, const char *pattern, bool literal,
                              brisk_split_behavior behavior, bool invert) {
  if (behavior > BRISK_SPLIT_CONTIGUOUS)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "pre-tokenizer: unknown split behavior %d",
                       (int)behavior);
  if (brisk_grow((void **)&p->steps, &p->cap, p->n_steps + 1, sizeof *p->steps) != 0)
    return brisk_error_oom();
  /* MATCH_INVALID_UTF: invalid bytes never match, so they fall into gaps;
   * DOLLAR_ENDONLY: '$' means end of piece, as in std::regex and Rust. */
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  if (literal) opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE erroff = 0;
  pcre2_code *re =
      pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &erroff, p->cctx);
  if (!re) {
    if (err == PCRE2_ERROR_HEAP_FAILED) return brisk_error_oom();
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof msg);
    return brisk_error(BRISK_E_FORMAT,
                       "pre-tokenizer: regex '%s' does not compile at offset %zu: %s", pattern,
                       (size_t)erroff, (const char *)msg);
  }
  /* JIT is an optimization: only running out of memory is an error. */
  int jrc = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  if (jrc == PCRE2_ERROR_NOMEMORY) {
    pcre2_code_free(re);
    return brisk_error_oom();
  }
  p->steps[p->n_steps].re = re;
  p->steps[p->n_steps].behavior = behavior;
  p->steps[p->n_steps].invert = invert;
  p->n_steps++;
  return BRISK_OK;
}

brisk_status brisk_pretok_ws_create(const brisk_pretok *p, brisk_pretok_ws **out) {
  brisk_pretok_ws *ws = brisk_calloc(1, sizeof *ws);
  if (!ws) return brisk_error_oom();
  if (p->n_steps) {
    ws->md = brisk_calloc(p->n_steps, sizeof *ws->md);
    if (!ws->md) {
      brisk_free(ws);
      return brisk_error_oom();
    }
  }
  for (size_t i = 0; i < p->n_steps; i++) {
    ws->md[i] = pcre2_match_data_create_from_pattern(p->steps[i].re, p->gctx);
    ws->n = i + 1;
    if (!ws->md[i]) {
      brisk_pretok_ws_free(ws);
      return brisk_error_oom();
    }
  }
  *out = ws;
  return BRISK_OK;
}

void brisk_pretok_ws_free(brisk_pretok_ws *ws) {
  if (!ws) return;
  for (size_t i = 0; i < ws->n; i++) pcre2_match_data_free(ws->md[i]);
  brisk_free(ws->md);
  brisk_free(ws);
}

/* One step's run: the pieces it produces go to the next step or to emit. */
typedef struct run_ctx {
  const brisk_pretok *p;
  brisk_pretok_ws *ws;
  brisk_pretok_emit emit;
  void *ctx;
} run_ctx;

static brisk_status run_step(const run_ctx *rc, size_t k, const char *s, size_t n);

static brisk_status forward(const run_ctx *rc, size_t k, const char *s, size_t n) {
  if (n == 0) return BRISK_OK;
  if (k + 1 < rc->p->n_steps) return run_step(rc, k + 1, s, n);
  return rc->emit(rc->ctx, s, n);
}

/* The behaviors as a state machine over (start, end, is_delimiter) intervals
 * in order; at most one piece is pending. */
typedef struct split_state {
  size_t pend_start, pend_end;
  bool has_pend, pend_delim;
} split_state;

static brisk_status on_interval(const run_ctx *rc, size_t k, const char *s, split_state *st,
                                size_t a, size_t b, bool delim) {
  brisk_status r = BRISK_OK;
  switch (rc->p->steps[k].behavior) {
  case BRISK_SPLIT_ISOLATED: return forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_REMOVED: return delim ? BRISK_OK : forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_MERGED_PREVIOUS:
    if (delim) {
      if (st->has_pend) {
        st->has_pend = false;
        return forward(rc, k, s + st->pend_start, b - st->pend_start);
      }
      return forward(rc, k, s + a, b - a);
    }
    if (st->has_pend) r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
    st->has_pend = true, st->pend_delim = false, st->pend_start = a, st->pend_end = b;
    return r;
  case BRISK_SPLIT_MERGED_NEXT:
    if (delim) {
      if (st->has_pend) r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
      st->has_pend = true, st->pend_delim = true, st->pend_start = a, st->pend_end = b;
      return r;
    }
    if (st->has_pend) {
      st->has_pend = false;
      return forward(rc, k, s + st->pend_start, b - st->pend_start);
    }
    return forward(rc, k, s + a, b - a);
  case BRISK_SPLIT_CONTIGUOUS:
    if (delim) {
      if (st->has_pend) {
        st->pend_end = b;
        return BRISK_OK;
      }
      st->has_pend = true, st->pend_delim = true, st->pend_start = a, st->pend_end = b;
      return BRISK_OK;
    }
    if (st->has_pend) {
      st->has_pend = false;
      r = forward(rc, k, s + st->pend_start, st->pend_end - st->pend_start);
      if (r != BRISK_OK) return r;
    }
    return forward(rc, k, s + a, b - a);
  }
  return BRISK_OK;
}

static brisk_status run_step(const run_ctx *rc, size_t k, const char *s, size_t n) {
  const pretok_step *step = &rc->p->steps[k];
  pcre2_match_data *md = rc->ws->md[k];
  split_state st = {0};
  size_t start = 0, last = 0;
  uint32_t opts = 0;
  brisk_status r = BRISK_OK;
  while (start <= n) {
    int m = pcre2_match(step->re, (PCRE2_SPTR)s, n, start, opts, md, rc->p->mctx);
    if (m == PCRE2_ERROR_NOMATCH) {
      if (opts == 0 || start >= n) break;
      /* No non-empty match where the last empty one was: move on a unit. */
      start += brisk_utf8_unit((const unsigned char *)s + start, n - start);
      opts = 0;
      continue;
    }
    if (m == PCRE2_ERROR_NOMEMORY || m == PCRE2_ERROR_HEAPLIMIT) return brisk_error_oom();
    if (m == PCRE2_ERROR_MATCHLIMIT || m == PCRE2_ERROR_DEPTHLIMIT ||
        m == PCRE2_ERROR_JIT_STACKLIMIT)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "pre-tokenizer: regex %zu gives up at byte %zu of a %zu-byte piece "
                         "(more than %d backtracking steps, or past the JIT stack)",
                         k, start, n, MATCH_LIMIT);
    if (m < 0) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(m, msg, sizeof msg);
      return brisk_error(BRISK_E_INTERNAL, "pre-tokenizer: regex match failed: %s",
                         (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (ms > last) r = on_interval(rc, k, s, &st, last, ms, step->invert);
    if (r == BRISK_OK && me > ms) r = on_interval(rc, k, s, &st, ms, me, !step->invert);
    if (r != BRISK_OK) return r;
    last = me;
    start = me;
    /* After an empty match, look for a non-empty one at the same place. */
    opts = me == ms ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    if (me == ms && me >= n) break;
  }
  if (last < n) r = on_interval(rc, k, s, &st, last, n, step->invert);
  if (r == BRISK_OK && st.has_pend)
    r = forward(rc, k, s + st.pend_start, st.pend_end - st.pend_start);
  return r;
}

brisk_status brisk_pretok_run(const brisk_pretok *p, brisk_pretok_ws *ws, const char *s, size_t n,
                              brisk_pretok_emit emit, void *ctx) {
  if (n == 0) return BRISK_OK;
  if (p->n_steps == 0) return emit(ctx, s, n);
  run_ctx rc = {p, ws, emit, ctx};
  return run_step(&rc, 0, s, n);
}
