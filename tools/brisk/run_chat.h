/* brisk run --chat: an interactive multi-turn chat on one runner. */
#ifndef BRISK_TOOLS_RUN_CHAT_H
#define BRISK_TOOLS_RUN_CHAT_H

#include "run_gen.h"

typedef struct chat_opts {
  const char *tmpl;   /* chat template family; NULL: the model's */
  const char *system; /* first system message; NULL: none */
  const char *first;  /* the first user turn (-p); NULL: none */
  int n_gen;          /* most tokens per reply */
  const char *save;   /* --save FILE: the conversation and its KV written at the end */
  const char *load;   /* --load FILE: a saved conversation to resume */
} chat_opts;

/* Runs the chat until /bye, end of input or Ctrl-C twice; returns the exit
 * code. Each line is a user turn (a line ending in '\' or a block between
 * lines of \"\"\" spans lines); lines starting with '/' are commands handled
 * here. The whole conversation is rendered with the chat template and only
 * what the KV cache does not already hold is prefilled. */
int run_chat(runner *r, const chat_opts *o);

#endif
