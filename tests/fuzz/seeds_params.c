/* Seeds for fuzz_params: each struct as its init function fills it, and
 * with struct_size one short, so mutations start from valid layouts. */
#include "fuzz_seeds.h"

#include "brisk.h"

#include <stdio.h>
#include <string.h>

static int save(const char *dir, const char *name, unsigned char sel, const void *p, size_t n) {
  unsigned char buf[1024];
  buf[0] = sel;
  memcpy(buf + 1, p, n);
  return fuzz_seed_save(dir, name, buf, n + 1);
}

int fuzz_write_seeds(const char *dir) {
  int bad = 0;
  brisk_engine_params e;
  brisk_engine_params_init(&e);
  e.kv_tokens = 128;
  bad |= save(dir, "engine", 0, &e, sizeof e);
  e.struct_size--;
  bad |= save(dir, "engine-short", 0, &e, sizeof e);
  brisk_context_params c;
  brisk_context_params_init(&c);
  c.kv_tokens = 128;
  bad |= save(dir, "context", 1, &c, sizeof c);
  brisk_sampler_params s;
  brisk_sampler_params_init(&s);
  s.temperature = 0.7f, s.top_k = 10, s.top_p = 0.9f, s.repeat_penalty = 1.1f;
  bad |= save(dir, "sampler", 2, &s, sizeof s);
  brisk_model_params m;
  brisk_model_params_init(&m);
  bad |= save(dir, "model", 3, &m, sizeof m);
  m.struct_size--;
  bad |= save(dir, "model-short", 3, &m, sizeof m);
  return bad;
}
