/* Command-line access to the reference (de)quantizers for check_gguf_py.py:
 *   quant_tool quantize   TYPE N in.f32 out.bin
 *   quant_tool dequantize TYPE N in.bin out.f32
 * TYPE is the GGUF type id; N elements (a multiple of the block size) are
 * processed as one row, which equals N / block_size independent blocks. */
#include "core/dtype.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>

static void *read_all(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *buf = malloc(want ? want : 1);
  size_t got = buf ? fread(buf, 1, want, f) : 0;
  fclose(f);
  if (got != want) {
    free(buf);
    return NULL;
  }
  return buf;
}

static int write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t put = fwrite(data, 1, n, f);
  return (fclose(f) == 0 && put == n) ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s quantize|dequantize TYPE N IN OUT\n", argv[0]);
    return 2;
  }
  int quantize = argv[1][0] == 'q';
  uint32_t type = (uint32_t)strtoul(argv[2], NULL, 0);
  int64_t n = strtoll(argv[3], NULL, 0);
  uint64_t row_bytes;
  if (n < 0 || !brisk_dtype_row_bytes(type, (uint64_t)n, &row_bytes)) {
    fprintf(stderr, "bad type %u or n %lld\n", type, (long long)n);
    return 2;
  }
  size_t in_bytes = quantize ? (size_t)n * 4 : (size_t)row_bytes;
  size_t out_bytes = quantize ? (size_t)row_bytes : (size_t)n * 4;
  void *in = read_all(argv[4], in_bytes);
  void *out = malloc(out_bytes ? out_bytes : 1);
  if (!in || !out) {
    fprintf(stderr, "cannot read %zu bytes from %s\n", in_bytes, argv[4]);
    return 1;
  }
  brisk_status st =
      quantize ? brisk_quantize_row(type, in, out, n) : brisk_dequantize_row(type, in, out, n);
  if (st != BRISK_OK) {
    fprintf(stderr, "%s\n", brisk_last_error());
    return 1;
  }
  int rc = write_all(argv[5], out, out_bytes);
  free(in);
  free(out);
  return rc ? 1 : 0;
}
