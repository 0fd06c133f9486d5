/* Helper of test_embed_reference.py: loads a model and prints, for every
 * text given, the token ids brisk_embed runs ("ids ...") and its vector
 * ("vec ...", %.9g) under the pooling and normalisation asked for.
 *
 * Usage: embed_vectors MODEL POOLING NORMALIZE TEXT...
 *   POOLING: default, mean, cls or last; NORMALIZE: -1 (the folder's), 0, 1. */
#include "brisk.h"
#include "core/alloc.h"
#include "model/embed_tok.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL POOLING NORMALIZE TEXT...\n", argv[0]);
    return 2;
  }
  const char *names[] = {"default", "mean", "cls", "last"};
  int pooling = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(argv[2], names[i])) pooling = i;
  if (pooling < 0) {
    fprintf(stderr, "unknown pooling '%s'\n", argv[2]);
    return 2;
  }
  brisk_model *m = NULL;
  if (brisk_model_load(argv[1], NULL, &m)) {
    fprintf(stderr, "load: %s\n", brisk_last_error());
    return 1;
  }
  int n = argc - 4, d = brisk_model_n_embd(m);
  float *out = malloc((size_t)(n ? n : 1) * (size_t)d * sizeof *out);
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = pooling;
  p.normalize = atoi(argv[3]);
  int rc = 0;
  if (brisk_embed(m, &p, (const char *const *)argv + 4, n, out, (size_t)n * (size_t)d)) {
    fprintf(stderr, "embed: %s\n", brisk_last_error());
    rc = 1;
  }
  for (int t = 0; t < n && !rc; t++) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (brisk_model_embed_tokens(m, argv[4 + t], strlen(argv[4 + t]), 1u << 20, &ids, &n_ids)) {
      fprintf(stderr, "tokens: %s\n", brisk_last_error());
      rc = 1;
      break;
    }
    printf("ids");
    for (size_t i = 0; i < n_ids; i++) printf(" %d", ids[i]);
    printf("\nvec");
    for (int i = 0; i < d; i++) printf(" %.9g", (double)out[(size_t)t * d + i]);
    printf("\n");
    brisk_free(ids);
  }
  free(out);
  brisk_model_free(m);
  return rc;
}
