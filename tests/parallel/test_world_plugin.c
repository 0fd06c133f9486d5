/* brisk_mpi_world without a usable MPI plugin: no libbrisk-mpi.so where it
 * is looked for is BRISK_E_UNSUPPORTED naming the places looked at; a file
 * of that name that is no shared object is BRISK_E_UNSUPPORTED saying it
 * cannot be loaded, with the loader's reason; a shared object without the
 * entry point is refused by name; and brisk_set_plugin_dir is refused once
 * the search ran. Each case in a child process, since a process looks for
 * its plugins once. Not cmocka: each child checks and exits nonzero. */
#include "brisk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,                 \
              brisk_last_error());                                                                 \
      _exit(1);                                                                                    \
    }                                                                                              \
  } while (0)

/* In a child: the plugin directory is dir; brisk_mpi_world must fail with
 * BRISK_E_UNSUPPORTED and a message holding want and want2. */
static int refused(const char *dir, const char *want, const char *want2) {
  pid_t pid = fork();
  if (pid == 0) {
    CHECK(brisk_set_plugin_dir(dir) == BRISK_OK);
    int32_t rank = -1, size = -1;
    CHECK(brisk_mpi_world(&rank, &size) == BRISK_E_UNSUPPORTED);
    CHECK(strstr(brisk_last_error(), want) != NULL);
    CHECK(strstr(brisk_last_error(), want2) != NULL);
    printf("refused: %s\n", brisk_last_error());
    fflush(stdout);
    /* The same answer again, and the directory is fixed now. */
    CHECK(brisk_mpi_world(&rank, &size) == BRISK_E_UNSUPPORTED);
    CHECK(strstr(brisk_last_error(), want) != NULL);
    CHECK(brisk_set_plugin_dir(dir) == BRISK_E_INVALID_STATE);
    brisk_mpi_finalize(); /* a no-op without a world */
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  /* A build directory's plugins would otherwise be found first. */
  unsetenv("BRISK_PLUGIN_DIR");
  char dir[] = "/tmp/brisk_world_pluginXXXXXX";
  if (!mkdtemp(dir)) return 1;
  char path[256];
  snprintf(path, sizeof path, "%s/libbrisk-mpi.so", dir);
  int fail = refused(dir, "no MPI plugin (libbrisk-mpi.so) was found", dir);
  write_file(path, "not an ELF file\n", 16);
  fail |= refused(dir, "cannot be loaded", path);
  /* argv[1]: a shared object that is not the plugin (libbrisk.so). */
  if (argc > 1) {
    FILE *in = fopen(argv[1], "rb");
    if (!in) return 1;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, in) != (size_t)n) return 1;
    fclose(in);
    write_file(path, buf, (size_t)n);
    free(buf);
    fail |= refused(dir, "is not brisk's MPI plugin (no brisk_mpi_plugin_entry_v1)", path);
  }
  remove(path);
  rmdir(dir);
  if (!fail) printf("ok\n");
  return fail;
}
