/* The struct_size rule (core/abi.h): the helper on every layout with random
 * contents, the layouts against the header, and every public call that reads
 * or fills a struct with a struct_size, in both directions (older, smaller
 * structs and newer, larger ones). */
#include "test_support.h"

#include "core/abi.h"

#include <stdlib.h>
#include <string.h>

#define BUF 4200 /* more than BRISK_ABI_MAX_STRUCT_SIZE */

static void fill_random(test_rng *r, unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(test_rng_u64(r) | 1); /* never 0 */
}

static void set_size(void *p, uint32_t s) { memcpy(p, &s, sizeof s); }
static uint32_t get_size(const void *p) {
  uint32_t s;
  memcpy(&s, p, sizeof s);
  return s;
}

/* Each list is in order, without gaps other than alignment padding and with
 * nothing after the last field but tail padding: a field added to brisk.h
 * and not to abi_layout.c breaks one of these (tests/api/abi_fields.py also
 * compares the names). */
static void test_layouts(void **state) {
  (void)state;
  assert_true(brisk_abi_n_layouts >= 15);
  for (size_t i = 0; i < brisk_abi_n_layouts; i++) {
    const brisk_abi_layout *l = brisk_abi_layouts[i];
    assert_true(l->n_fields >= 2);
    assert_int_equal(l->fields[0].offset, 0);
    assert_int_equal(l->fields[0].size, sizeof(uint32_t));
    size_t end = 0, max_align = 1;
    for (size_t f = 0; f < l->n_fields; f++) {
      size_t align = l->fields[f].size < 8 ? l->fields[f].size : 8;
      if (align > max_align) max_align = align;
      size_t expect = (end + align - 1) / align * align;
      if (l->fields[f].offset != expect)
        fail_msg("%s: field %zu at %u, expected %zu (a field missing from abi_layout.c?)", l->name,
                 f, l->fields[f].offset, expect);
      end = (size_t)l->fields[f].offset + l->fields[f].size;
    }
    size_t padded = (end + max_align - 1) / max_align * max_align;
    if (padded != l->size)
      fail_msg("%s: fields end at %zu, sizeof is %zu (a field missing from abi_layout.c?)", l->name,
               end, l->size);
  }
}

/* Reading: for every whole-field size, the caller's bytes up to it and the
 * defaults after it; larger sizes with a zero tail; refusals leave the
 * destination as it was. */
static void test_read_rule(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("abi_read");
  static unsigned char src[BUF], defaults[BUF], dst[BUF], before[BUF];
  for (size_t i = 0; i < brisk_abi_n_layouts; i++) {
    const brisk_abi_layout *l = brisk_abi_layouts[i];
    fill_random(&r, src, sizeof src);
    fill_random(&r, defaults, sizeof defaults);
    for (size_t f = 0; f < l->n_fields; f++) {
      uint32_t s = (uint32_t)(l->fields[f].offset + l->fields[f].size);
      set_size(src, s);
      memcpy(dst, defaults, l->size);
      assert_int_equal(brisk_abi_read(l, src, dst), BRISK_OK);
      assert_int_equal(get_size(dst), l->size);
      assert_memory_equal(dst + 4, src + 4, s - 4);
      if (s < l->size) assert_memory_equal(dst + s, defaults + s, l->size - s);
    }
    /* Newer and larger: accepted with a zero tail, refused with any other. */
    uint32_t big = (uint32_t)l->size + 40;
    memset(src + l->size, 0, big - l->size);
    set_size(src, big);
    memcpy(dst, defaults, l->size);
    assert_int_equal(brisk_abi_read(l, src, dst), BRISK_OK);
    assert_memory_equal(dst + 4, src + 4, l->size - 4);
    size_t at = l->size + test_rng_u64(&r) % (big - l->size);
    src[at] = 0x5a;
    memcpy(dst, defaults, l->size);
    memcpy(before, dst, l->size);
    assert_int_equal(brisk_abi_read(l, src, dst), BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), l->name));
    assert_non_null(strstr(brisk_last_error(), "not zero"));
    assert_memory_equal(dst, before, l->size);
    /* Sizes no header declares. */
    uint32_t bad[] = {0, 3, BRISK_ABI_MAX_STRUCT_SIZE + 1, UINT32_MAX};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
      set_size(src, bad[b]);
      assert_int_equal(brisk_abi_read(l, src, dst), BRISK_E_INVALID_ARGUMENT);
      assert_non_null(strstr(brisk_last_error(), "struct_size"));
      assert_memory_equal(dst, before, l->size);
    }
    for (size_t f = 1; f < l->n_fields; f++) {
      if (l->fields[f].size < 2) continue;
      uint32_t inside =
          l->fields[f].offset + 1 + (uint32_t)(test_rng_u64(&r) % (l->fields[f].size - 1));
      set_size(src, inside);
      assert_int_equal(brisk_abi_read(l, src, dst), BRISK_E_INVALID_ARGUMENT);
      assert_non_null(strstr(brisk_last_error(), "inside"));
      assert_memory_equal(dst, before, l->size);
    }
  }
}

/* Writing: exactly the caller's struct_size bytes (or ours, if smaller), and
 * struct_size then says how many. */
static void test_write_rule(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("abi_write");
  static unsigned char src[BUF], dst[BUF];
  for (size_t i = 0; i < brisk_abi_n_layouts; i++) {
    const brisk_abi_layout *l = brisk_abi_layouts[i];
    fill_random(&r, src, l->size);
    for (size_t f = 0; f < l->n_fields; f++) {
      uint32_t s = (uint32_t)(l->fields[f].offset + l->fields[f].size);
      memset(dst, 0xab, sizeof dst);
      set_size(dst, s);
      assert_int_equal(brisk_abi_write(l, dst, src), BRISK_OK);
      assert_int_equal(get_size(dst), s);
      assert_memory_equal(dst + 4, src + 4, s - 4);
      for (size_t b = s; b < sizeof dst; b++) assert_int_equal(dst[b], 0xab);
    }
    memset(dst, 0xab, sizeof dst);
    set_size(dst, (uint32_t)l->size + 64);
    assert_int_equal(brisk_abi_write(l, dst, src), BRISK_OK);
    assert_int_equal(get_size(dst), l->size);
    assert_memory_equal(dst + 4, src + 4, l->size - 4);
    for (size_t b = l->size; b < sizeof dst; b++) assert_int_equal(dst[b], 0xab);
    memset(dst, 0xab, sizeof dst);
    set_size(dst, BRISK_ABI_MAX_STRUCT_SIZE + 8);
    assert_int_equal(brisk_abi_write(l, dst, src), BRISK_E_INVALID_ARGUMENT);
    assert_int_equal(dst[4], 0xab);
    assert_int_equal(brisk_abi_check_out(l, dst), BRISK_E_INVALID_ARGUMENT);
  }
}

/* ------------------------------------------------------------------------ */
/* Every public reader and writer                                           */
/* ------------------------------------------------------------------------ */

static brisk_model *model;
static const char *model_path;
static brisk_context *ctx;
static brisk_engine *engine;
static brisk_spec *spec;
static uint64_t live_id;

static brisk_status call_model(const void *p) {
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(model_path, p, &m);
  brisk_model_free(m);
  return st;
}
static brisk_status call_context(const void *p) {
  brisk_context *c = NULL;
  brisk_status st = brisk_context_create(model, p, &c);
  brisk_context_free(c);
  return st;
}
static brisk_status call_sampler(const void *p) {
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sampler_create(model, p, &s);
  brisk_sampler_free(s);
  return st;
}
static brisk_status call_stopper(const void *p) {
  brisk_stopper *s = NULL;
  brisk_status st = brisk_stopper_create(model, p, &s);
  brisk_stopper_free(s);
  return st;
}
static brisk_status call_spec(const void *p) {
  brisk_spec *s = NULL;
  brisk_status st = brisk_spec_create(ctx, p, &s);
  brisk_spec_free(s);
  return st;
}
static brisk_status call_engine(const void *p) {
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(model, p, &e);
  brisk_engine_free(e);
  return st;
}
static brisk_status call_submit(const void *p) {
  uint64_t id = 0;
  brisk_status st = brisk_engine_submit(engine, p, &id);
  if (!st) st = brisk_engine_cancel(engine, id);
  return st;
}
/* The request params' sampler, read through the same rule. */
static brisk_status call_submit_sampler(const void *p) {
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = "Once upon a time";
  rp.sampler = p;
  return call_submit(&rp);
}

static void init_model(void *p) { brisk_model_params_init(p); }
static void init_context(void *p) { brisk_context_params_init(p); }
static void init_sampler(void *p) { brisk_sampler_params_init(p); }
static void init_stopper(void *p) { brisk_stopper_params_init(p); }
static void init_spec(void *p) { brisk_spec_params_init(p); }
/* A draft model (the model itself: same vocabulary), so that the draft
 * context's params pointer is used. */
static void init_spec_draft(void *p) {
  brisk_spec_params *s = p;
  brisk_spec_params_init(s);
  s->drafter = BRISK_SPEC_DRAFT_MODEL;
  s->draft_model = model;
}
static void init_engine(void *p) {
  brisk_engine_params *e = p;
  brisk_engine_params_init(e);
  e->kv_tokens = 256;
  e->max_running = 4;
}
static void init_request(void *p) {
  brisk_request_params *r = p;
  brisk_request_params_init(r);
  r->prompt_text = "Once upon a time";
  r->max_tokens = 4;
}

typedef struct params_case {
  const brisk_abi_layout *layout;
  void (*init)(void *);
  brisk_status (*call)(const void *);
  /* Fields before this offset are needed for the call to succeed (a
   * prompt); smaller sizes are not tried. */
  size_t min_useful;
} params_case;

/* For every whole-field size s, every byte past s is garbage (0xff: NaN
 * floats, negative counts, wild pointers): the call succeeds only if it reads
 * nothing beyond s. Then the larger sizes. */
static void check_params(const params_case *pc) {
  static unsigned char buf[BUF];
  const brisk_abi_layout *l = pc->layout;
  for (size_t f = 0; f < l->n_fields; f++) {
    uint32_t s = (uint32_t)(l->fields[f].offset + l->fields[f].size);
    if (s < pc->min_useful) continue;
    memset(buf, 0, sizeof buf);
    pc->init(buf);
    memset(buf + s, 0xff, l->size - s);
    set_size(buf, s);
    brisk_status st = pc->call(buf);
    if (st) fail_msg("%s with struct_size %u: %s", l->name, s, brisk_last_error());
  }
  memset(buf, 0, sizeof buf);
  pc->init(buf);
  set_size(buf, (uint32_t)l->size + 24);
  brisk_status st = pc->call(buf);
  if (st) fail_msg("%s, larger with a zero tail: %s", l->name, brisk_last_error());
  buf[l->size + 9] = 1;
  assert_int_equal(pc->call(buf), BRISK_E_INVALID_ARGUMENT);
  if (!strstr(brisk_last_error(), l->name) || !strstr(brisk_last_error(), "not zero"))
    fail_msg("%s: message '%s'", l->name, brisk_last_error());
  set_size(buf, (uint32_t)l->fields[1].offset + 1);
  assert_int_equal(pc->call(buf), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "struct_size"));
}

static brisk_status out_tensor(void *p) { return brisk_model_tensor(model, 0, p); }
static brisk_status out_kv(void *p) { return brisk_context_kv_stats(ctx, p); }
static brisk_status out_spec(void *p) { return brisk_spec_get_stats(spec, p); }
static brisk_status out_step(void *p) { return brisk_engine_step(engine, p); }
static brisk_status out_request(void *p) { return brisk_engine_request_stats(engine, live_id, p); }
static brisk_status out_counters(void *p) { return brisk_engine_stats(engine, p); }
static brisk_status out_metrics(void *p) { return brisk_engine_get_metrics(engine, p); }

typedef struct out_case {
  const brisk_abi_layout *layout;
  brisk_status (*call)(void *);
} out_case;

static void check_out(const out_case *oc) {
  static unsigned char buf[BUF];
  const brisk_abi_layout *l = oc->layout;
  for (size_t f = 0; f < l->n_fields; f++) {
    uint32_t s = (uint32_t)(l->fields[f].offset + l->fields[f].size);
    memset(buf, 0xab, sizeof buf);
    set_size(buf, s);
    brisk_status st = oc->call(buf);
    if (st) fail_msg("%s with struct_size %u: %s", l->name, s, brisk_last_error());
    assert_int_equal(get_size(buf), s);
    for (size_t b = s; b < sizeof buf; b++)
      if (buf[b] != 0xab) fail_msg("%s with struct_size %u: byte %zu written", l->name, s, b);
  }
  memset(buf, 0xab, sizeof buf);
  set_size(buf, (uint32_t)l->size + 32);
  assert_int_equal(oc->call(buf), BRISK_OK);
  assert_int_equal(get_size(buf), l->size);
  for (size_t b = l->size; b < sizeof buf; b++) assert_int_equal(buf[b], 0xab);
  memset(buf, 0xab, sizeof buf);
  set_size(buf, (uint32_t)l->fields[1].offset + 1);
  assert_int_equal(oc->call(buf), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), l->name));
  assert_int_equal(buf[8], 0xab);
}

static int setup_model(void **state) {
  (void)state;
  model_path = test_shared_path("models/stories260K.gguf");
  if (!model_path) return 0;
  brisk_engine_params ep;
  init_engine(&ep);
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 256;
  if (brisk_model_load(model_path, NULL, &model) || brisk_context_create(model, &cp, &ctx) ||
      brisk_spec_create(ctx, NULL, &spec) || brisk_engine_create(model, &ep, &engine))
    fail_msg("setup: %s", brisk_last_error());
  return 0;
}

static int teardown_model(void **state) {
  (void)state;
  brisk_engine_free(engine);
  brisk_spec_free(spec);
  brisk_context_free(ctx);
  brisk_model_free(model);
  return 0;
}

static void test_public_params(void **state) {
  (void)state;
  if (!model) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  size_t prompt_end = offsetof(brisk_request_params, prompt_text) + sizeof(const char *);
  const params_case cases[] = {
      {&brisk_abi_model_params, init_model, call_model, 0},
      {&brisk_abi_context_params, init_context, call_context, 0},
      {&brisk_abi_sampler_params, init_sampler, call_sampler, 0},
      {&brisk_abi_sampler_params, init_sampler, call_submit_sampler, 0},
      {&brisk_abi_stopper_params, init_stopper, call_stopper, 0},
      {&brisk_abi_spec_params, init_spec, call_spec, 0},
      {&brisk_abi_spec_params, init_spec_draft, call_spec,
       offsetof(brisk_spec_params, draft_model) + sizeof(void *)},
      {&brisk_abi_engine_params, init_engine, call_engine, 0},
      {&brisk_abi_request_params, init_request, call_submit, prompt_end},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_params(&cases[i]);
}

static void test_public_allocator(void **state) {
  (void)state;
  /* The allocator has no defaults for its functions: a caller's struct must
   * cover them, and a larger one needs a zero tail. */
  struct {
    brisk_allocator a;
    unsigned char tail[16];
  } big;
  memset(&big, 0, sizeof big);
  big.a.struct_size = sizeof big;
  big.a.malloc_fn = NULL;
  assert_int_equal(brisk_set_allocator(&big.a), BRISK_E_INVALID_ARGUMENT);
  big.tail[3] = 1;
  assert_int_equal(brisk_set_allocator(&big.a), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "not zero"));
  big.a.struct_size = offsetof(brisk_allocator, free_fn);
  assert_int_equal(brisk_set_allocator(&big.a), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "NULL function"));
}

static void test_public_outputs(void **state) {
  (void)state;
  if (!model) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_request_params rp;
  init_request(&rp);
  assert_int_equal(brisk_engine_submit(engine, &rp, &live_id), BRISK_OK);
  const out_case cases[] = {
      {&brisk_abi_tensor_info, out_tensor},       {&brisk_abi_kv_stats, out_kv},
      {&brisk_abi_spec_stats, out_spec},          {&brisk_abi_request_stats, out_request},
      {&brisk_abi_engine_counters, out_counters}, {&brisk_abi_engine_metrics, out_metrics},
      {&brisk_abi_engine_step_info, out_step},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_out(&cases[i]);
  /* The values written are the same as into a full struct. */
  brisk_engine_counters full = {.struct_size = sizeof full}, part;
  memset(&part, 0, sizeof part);
  part.struct_size = offsetof(brisk_engine_counters, n_swapped_out);
  assert_int_equal(brisk_engine_stats(engine, &full), BRISK_OK);
  assert_int_equal(brisk_engine_stats(engine, &part), BRISK_OK);
  assert_int_equal(part.n_submitted, full.n_submitted);
  assert_int_equal(part.n_kv_blocks, full.n_kv_blocks);
  assert_int_equal(part.n_swapped_out, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layouts),       cmocka_unit_test(test_read_rule),
      cmocka_unit_test(test_write_rule),    cmocka_unit_test(test_public_allocator),
      cmocka_unit_test(test_public_params), cmocka_unit_test(test_public_outputs),
  };
  return cmocka_run_group_tests(tests, setup_model, teardown_model);
}
