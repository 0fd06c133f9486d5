/* disaggregated: prefill on one engine, decode on another. A child process
 * (the decode side) loads the model on its own; the parent (the prefill
 * side) evaluates the prompt, exports the sequence with brisk_seq_export_to
 * into a pipe, and the child restores it with brisk_seq_import_from into a
 * sequence id of its own context and generates greedily (a context of
 * another block size would do as well, agreeing to rounding). The parent then continues the same
 * sequence itself, as a single engine would, and checks that both produced the same tokens.
 *
 *   disaggregated MODEL.gguf "Once upon a time" [N_TOKENS]
 */
#ifndef BRISK_EXPERIMENTAL
#  define BRISK_EXPERIMENTAL /* the snapshot calls */
#endif
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TOKENS 256

static int fail(const char *who, const char *what) {
  fprintf(stderr, "disaggregated (%s): %s: %s\n", who, what, brisk_last_error());
  return 1;
}

/* Whole reads and writes on a pipe. */
static int write_all(void *user, const void *data, size_t n) {
  int fd = *(int *)user;
  for (const char *p = data; n > 0;) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return 1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

static int read_all(void *user, void *data, size_t n) {
  int fd = *(int *)user;
  for (char *p = data; n > 0;) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return 1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Greedy tokens after a sequence whose last logits are `logits`, decoding
 * from position pos on seq. */
static int generate(brisk_context *ctx, int32_t seq, int32_t pos, const float *logits, int n,
                    int32_t *out) {
  const int32_t n_vocab = brisk_model_n_vocab(brisk_context_model(ctx));
  brisk_batch *b = NULL;
  if (brisk_batch_create(1, &b)) return 1;
  int32_t tok = argmax(logits, n_vocab);
  for (int i = 0; i < n; i++) {
    out[i] = tok;
    brisk_batch_clear(b);
    brisk_batch_add(b, tok, pos + i, seq, 1);
    if (brisk_decode(ctx, b)) {
      brisk_batch_free(b);
      return 1;
    }
    tok = argmax(brisk_get_logits(ctx, 0), n_vocab);
  }
  brisk_batch_free(b);
  return 0;
}

static brisk_context *make_context(const brisk_model *m, int32_t block_size, int32_t kv_tokens) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.block_size = block_size;
  p.kv_tokens = kv_tokens;
  p.n_seq_max = 8;
  brisk_context *c = NULL;
  return brisk_context_create(m, &p, &c) == BRISK_OK ? c : NULL;
}

/* The decode side: a model and context of its own; the snapshot arrives on
 * fd_in (the prompt's last logits first), the tokens go back on fd_out. */
static int decode_side(const char *path, int fd_in, int fd_out, int n) {
  brisk_model *m = NULL;
  if (brisk_model_load(path, NULL, &m)) return fail("decode", "load");
  const int32_t n_vocab = brisk_model_n_vocab(m);
  brisk_context *ctx = make_context(m, 16, 4096);
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  int32_t out[MAX_TOKENS];
  const int32_t seq = 5; /* any id */
  int rc = 1;
  if (!ctx || !logits) {
    fail("decode", "context");
  } else if (read_all(&fd_in, logits, (size_t)n_vocab * sizeof *logits) ||
             brisk_seq_import_from(ctx, seq, read_all, &fd_in)) {
    fail("decode", "import");
  } else if (generate(ctx, seq, brisk_seq_len(ctx, seq), logits, n, out)) {
    fail("decode", "generate");
  } else {
    rc = write_all(&fd_out, out, (size_t)n * sizeof *out);
  }
  free(logits);
  brisk_context_free(ctx);
  brisk_model_free(m);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N_TOKENS]\n", argv[0]);
    return 2;
  }
  int n = argc > 3 ? atoi(argv[3]) : 32;
  if (n < 1 || n > MAX_TOKENS) n = 32;
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    close(to_child[1]), close(to_parent[0]);
    _exit(decode_side(argv[1], to_child[0], to_parent[1], n));
  }
  close(to_child[0]), close(to_parent[1]);

  /* The prefill side. */
  brisk_model *m = NULL;
  if (brisk_model_load(argv[1], NULL, &m)) return fail("prefill", "load");
  const int32_t n_vocab = brisk_model_n_vocab(m);
  int32_t toks[1024];
  size_t n_prompt = 0;
  if (brisk_tokenize(m, argv[2], strlen(argv[2]), toks, 1024, BRISK_TOKENIZE_ADD_SPECIAL,
                     &n_prompt) ||
      n_prompt == 0)
    return fail("prefill", "tokenize");
  brisk_context *ctx = make_context(m, 16, 4096);
  brisk_batch *b = NULL;
  if (!ctx || brisk_batch_create((int32_t)n_prompt, &b)) return fail("prefill", "context");
  for (size_t i = 0; i < n_prompt; i++)
    brisk_batch_add(b, toks[i], (int32_t)i, 0, i + 1 == n_prompt);
  if (brisk_decode(ctx, b)) return fail("prefill", "decode");
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  memcpy(logits, brisk_get_logits(ctx, (int32_t)n_prompt - 1), (size_t)n_vocab * sizeof *logits);
  size_t snap_bytes = 0;
  brisk_seq_export(ctx, 0, NULL, 0, &snap_bytes);
  if (write_all(&to_child[1], logits, (size_t)n_vocab * sizeof *logits) ||
      brisk_seq_export_to(ctx, 0, write_all, &to_child[1]))
    return fail("prefill", "export");
  close(to_child[1]);
  fprintf(stderr, "prefilled %zu prompt tokens; handed over a snapshot of %zu bytes\n", n_prompt,
          snap_bytes);

  /* The single-engine reference: the same context goes on decoding. */
  int32_t single[MAX_TOKENS], split[MAX_TOKENS];
  if (generate(ctx, 0, (int32_t)n_prompt, logits, n, single)) return fail("prefill", "generate");
  int got = read_all(&to_parent[0], split, (size_t)n * sizeof *split);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "disaggregated: the decode side failed\n");
    return 1;
  }
  char piece[256];
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    if (brisk_token_to_piece(m, split[i], 0, piece, sizeof piece, &len) == BRISK_OK)
      fwrite(piece, 1, len, stdout);
  }
  printf("\n");
  int same = memcmp(single, split, (size_t)n * sizeof *split) == 0;
  printf("%d tokens decoded on the other engine %s a single engine's\n", n,
         same ? "equal" : "DIFFER FROM");
  free(logits);
  brisk_batch_free(b);
  brisk_context_free(ctx);
  brisk_model_free(m);
  return same ? 0 : 1;
}
