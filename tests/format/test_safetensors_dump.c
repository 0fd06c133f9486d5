/* Helper for test_safetensors_reference.py, which checks brisk against the
 * reference safetensors library in both directions.
 *
 *   dump FILE   prints the file as brisk reads it, one record a line:
 *                 M <key hex> <value hex>
 *                 T <name hex> <DTYPE> <dim,dim,...|-> <data hex|->
 *               and exits 0, or prints "E <status> <message>" and exits 2.
 *   write FILE  reads records in the same form from stdin and writes them
 *               with brisk's writer.
 * Names go in hex so that any byte survives the trip. */
#include "core/alloc.h"
#include "core/dtype.h"
#include "format/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_hex(const void *p, size_t n) {
  const unsigned char *c = p;
  if (n == 0) fputc('-', stdout);
  for (size_t i = 0; i < n; i++) printf("%02x", c[i]);
}

static int dump(const char *path) {
  brisk_safetensors *st;
  brisk_status s = brisk_safetensors_open(path, &st);
  if (s != BRISK_OK) {
    printf("E %d %s\n", s, brisk_last_error());
    return 2;
  }
  const char *k, *v;
  for (size_t i = 0; brisk_safetensors_metadata_at(st, i, &k, &v); i++) {
    printf("M ");
    put_hex(k, strlen(k));
    printf(" ");
    put_hex(v, strlen(v));
    printf("\n");
  }
  for (size_t i = 0; i < brisk_safetensors_n_tensors(st); i++) {
    const brisk_safetensors_tensor *t = brisk_safetensors_tensor_at(st, i);
    printf("T ");
    put_hex(t->name, strlen(t->name));
    printf(" %s ", brisk_safetensors_dtype_name(t->dtype));
    if (t->n_dims == 0) printf("-");
    for (uint32_t d = 0; d < t->n_dims; d++)
      printf("%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
    printf(" ");
    put_hex(t->data, (size_t)t->n_bytes);
    printf("\n");
  }
  brisk_safetensors_close(st);
  return 0;
}

/* Decodes hex (or "-" for empty) in place; returns the byte count. */
static size_t unhex(char *s) {
  if (strcmp(s, "-") == 0) {
    s[0] = 0;
    return 0;
  }
  size_t n = strlen(s) / 2;
  for (size_t i = 0; i < n; i++) {
    unsigned x;
    sscanf(s + 2 * i, "%2x", &x);
    s[i] = (char)x;
  }
  s[n] = 0;
  return n;
}

static int write_file(const char *path) {
  brisk_safetensors_writer *w;
  if (brisk_safetensors_writer_create(&w) != BRISK_OK) return 1;
  static char line[1 << 22];
  int rc = 0;
  while (rc == 0 && fgets(line, sizeof line, stdin)) {
    char *save, *kind = strtok_r(line, " \n", &save);
    if (!kind) continue;
    char *a = strtok_r(NULL, " \n", &save), *b = strtok_r(NULL, " \n", &save);
    if (!a || !b) return 1;
    if (kind[0] == 'M') {
      unhex(a);
      unhex(b);
      if (brisk_safetensors_writer_set_metadata(w, a, b) != BRISK_OK) rc = 1;
      continue;
    }
    char *dims = strtok_r(NULL, " \n", &save), *data = strtok_r(NULL, " \n", &save);
    if (!dims || !data) return 1;
    unhex(a);
    uint32_t dtype = strcmp(b, "F32") == 0   ? BRISK_DTYPE_F32
                     : strcmp(b, "F16") == 0 ? BRISK_DTYPE_F16
                                             : BRISK_DTYPE_BF16;
    uint64_t shape[BRISK_SAFETENSORS_MAX_DIMS];
    uint32_t n_dims = 0;
    if (strcmp(dims, "-") != 0) {
      char *dsave, *tok = strtok_r(dims, ",", &dsave);
      for (; tok && n_dims < BRISK_SAFETENSORS_MAX_DIMS; tok = strtok_r(NULL, ",", &dsave))
        shape[n_dims++] = strtoull(tok, NULL, 10);
    }
    size_t n = unhex(data);
    if (brisk_safetensors_writer_add_tensor(w, a, dtype, n_dims, shape, data, n) != BRISK_OK)
      rc = 1;
  }
  if (rc == 0 && brisk_safetensors_writer_write_file(w, path) != BRISK_OK) rc = 1;
  if (rc) fprintf(stderr, "write failed: %s\n", brisk_last_error());
  brisk_safetensors_writer_free(w);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
  if (argc == 3 && strcmp(argv[1], "write") == 0) return write_file(argv[2]);
  fprintf(stderr, "usage: %s dump|write FILE\n", argv[0]);
  return 1;
}
