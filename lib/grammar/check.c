/* The checks that make a parsed grammar safe to match: every rule reachable
 * from the root can finish (so a non-empty matcher state can always still
 * reach a whole match, and a token the mask admits never leads into a dead
 * end), and no rule can begin with itself without consuming a character
 * (left recursion would make the stack expansion loop forever). */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

/* Iterates "alternative of rule r": calls body for each element index. */
static uint32_t alt_end(const brisk_grammar *g, uint32_t i) {
  while (g->elems[i].type != GR_ALT && g->elems[i].type != GR_END) i++;
  return i;
}

/* Fixed point: rule r is nullable (derives "") / productive (derives some
 * string) if one of its alternatives is made of nullable (productive)
 * elements. Sets are never nullable and always productive (none is empty). */
static void fixed_point(const brisk_grammar *g, uint8_t *flag, int productive) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t r = 0; r < g->n_rules; r++) {
      if (flag[r]) continue;
      for (uint32_t i = g->rule_start[r];;) {
        uint32_t e = alt_end(g, i);
        int ok = 1;
        for (uint32_t j = i; j < e && ok; j++) {
          const gr_elem *x = &g->elems[j];
          ok = x->type == GR_SET ? productive : flag[x->value];
        }
        if (ok) {
          flag[r] = 1;
          changed = 1;
          break;
        }
        if (g->elems[e].type == GR_END) break;
        i = e + 1;
      }
    }
  }
}

/* Depth-first search over "rule r can begin with rule s" edges; state 1 =
 * on the path, 2 = done. Returns a rule on a cycle, or -1. */
static long left_cycle(const brisk_grammar *g, const uint8_t *nullable, uint8_t *state,
                       uint32_t *stack, uint32_t *iter, uint32_t start) {
  size_t top = 0;
  stack[top] = start;
  iter[top] = g->rule_start[start];
  state[start] = 1;
  while (1) {
    uint32_t r = stack[top];
    uint32_t i = iter[top];
    long next = -1;
    /* Advance over the left corner of r's alternatives from element i. */
    while (next < 0) {
      const gr_elem *x = &g->elems[i];
      if (x->type == GR_END) break;
      if (x->type == GR_ALT) {
        i++;
        continue;
      }
      if (x->type == GR_SET) { /* this alternative's left corner ends here */
        i = alt_end(g, i);
        continue;
      }
      /* GR_REF: an edge; the corner goes on past it only if it is nullable. */
      next = (long)x->value;
      i = nullable[x->value] ? i + 1 : alt_end(g, i);
    }
    iter[top] = i;
    if (next < 0) {
      state[r] = 2;
      if (top == 0) return -1;
      top--;
      continue;
    }
    if (state[next] == 1) return next;
    if (state[next] == 2) continue;
    state[next] = 1;
    stack[++top] = (uint32_t)next;
    iter[top] = g->rule_start[next];
  }
}

/* The name to show for rule r: a synthesized rule stands for a group or
 * repetition inside the rule it is named after. */
static const char *shown(const brisk_grammar *g, size_t r) { return g->rule_names[r]; }

brisk_status gr_check(brisk_grammar *g, const char *what);
brisk_status gr_check(brisk_grammar *g, const char *what) {
  size_t n = g->n_rules;
  uint8_t *nullable = brisk_calloc(n, 1), *productive = brisk_calloc(n, 1);
  uint8_t *reach = brisk_calloc(n, 1), *state = brisk_calloc(n, 1);
  uint32_t *stack = brisk_calloc(n + 1, sizeof *stack), *iter = brisk_calloc(n + 1, sizeof *iter);
  brisk_status st = BRISK_OK;
  if (!nullable || !productive || !reach || !state || !stack || !iter) {
    st = brisk_error_oom();
    goto done;
  }
  fixed_point(g, nullable, 0);
  fixed_point(g, productive, 1);
  /* Reachable rules, by a worklist in `stack`. */
  size_t top = 0;
  stack[top++] = g->root;
  reach[g->root] = 1;
  while (top > 0) {
    uint32_t r = stack[--top];
    for (uint32_t i = g->rule_start[r]; g->elems[i].type != GR_END; i++)
      if (g->elems[i].type == GR_REF && !reach[g->elems[i].value]) {
        reach[g->elems[i].value] = 1;
        stack[top++] = g->elems[i].value;
      }
  }
  for (size_t r = 0; r < n; r++)
    if (reach[r] && !productive[r]) {
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: rule '%s' can never finish (each of its alternatives needs itself "
                       "again)",
                       what, shown(g, r));
      goto done;
    }
  for (size_t r = 0; r < n; r++) {
    if (!reach[r] || state[r]) continue;
    long c = left_cycle(g, nullable, state, stack, iter, (uint32_t)r);
    if (c >= 0) {
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: rule '%s' is left-recursive (it can begin with itself without "
                       "consuming a character)",
                       what, shown(g, (size_t)c));
      goto done;
    }
  }
done:
  brisk_free(nullable);
  brisk_free(productive);
  brisk_free(reach);
  brisk_free(state);
  brisk_free(stack);
  brisk_free(iter);
  return st;
}
