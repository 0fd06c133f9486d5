/* Replays a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once
 * on every file named on the command line or found (not recursively) in a
 * named folder, each in an exactly-sized heap copy so that sanitizers see
 * any read past the end. Arguments starting with '-' (libFuzzer flags) are
 * ignored. With no inputs it runs the empty input. Exits non-zero if an
 * input cannot be read or a named folder holds no files. */
#include "fuzz_target.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
    return 1;
  }
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  int err = !buf || ferror(f);
  fclose(f);
  if (err) {
    fprintf(stderr, "cannot read %s\n", path);
    free(buf);
    return 1;
  }
  unsigned char *exact = malloc(n ? n : 1); /* [n]: no slack after the input */
  if (n) memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  int errors = 0, inputs = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "cannot stat %s: %s\n", argv[i], strerror(errno));
      errors++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      errors += run_file(argv[i]);
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "cannot open %s: %s\n", argv[i], strerror(errno));
      errors++;
      continue;
    }
    int in_dir = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      errors += run_file(path);
      in_dir++;
    }
    closedir(d);
    if (in_dir == 0) {
      fprintf(stderr, "%s holds no inputs\n", argv[i]);
      errors++;
    }
    inputs += in_dir;
  }
  if (inputs == 0 && errors == 0) {
    LLVMFuzzerTestOneInput(NULL, 0);
    inputs = 1;
  }
  printf("%s: ran %d inputs, %d errors\n", argv[0], inputs, errors);
  return errors ? 1 : 0;
}
