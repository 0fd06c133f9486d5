/* The size and field offsets of every public struct the bindings declare,
 * as the C compiler lays them out from brisk.h, one per line:
 *   struct NAME SIZE
 *   field NAME.FIELD OFFSET SIZE
 * The Python, Rust and Go tests compare their own declarations with this. */
#include "brisk.h"
#include "core/abi.h"

#include <stdio.h>

static void print_layout(const brisk_abi_layout *l) {
  printf("struct %s %zu\n", l->name, l->size);
  for (size_t f = 0; f < l->n_fields; f++)
    printf("field %s.%s %u %u\n", l->name, l->fields[f].name, l->fields[f].offset,
           l->fields[f].size);
}

/* Structs without a struct_size (arrays the host allocates, plain pairs). */
#define S(T, ...)                                                                                  \
  do {                                                                                             \
    static const brisk_abi_field f[] = {__VA_ARGS__};                                              \
    brisk_abi_layout l = {#T, sizeof(T), f, sizeof f / sizeof *f};                                 \
    print_layout(&l);                                                                              \
  } while (0)
#define F(T, x) BRISK_ABI_FIELD(T, x)

int main(void) {
  for (size_t i = 0; i < brisk_abi_n_layouts; i++) print_layout(brisk_abi_layouts[i]);
  S(brisk_chat_message, F(brisk_chat_message, role), F(brisk_chat_message, content));
  S(brisk_logit_bias, F(brisk_logit_bias, token), F(brisk_logit_bias, bias));
  S(brisk_token_logprob, F(brisk_token_logprob, token), F(brisk_token_logprob, logprob));
  S(brisk_engine_event, F(brisk_engine_event, id), F(brisk_engine_event, user_data),
    F(brisk_engine_event, token), F(brisk_engine_event, text), F(brisk_engine_event, text_len),
    F(brisk_engine_event, finished), F(brisk_engine_event, reason), F(brisk_engine_event, index),
    F(brisk_engine_event, logprob), F(brisk_engine_event, top_logprobs),
    F(brisk_engine_event, n_top_logprobs));
  return 0;
}
