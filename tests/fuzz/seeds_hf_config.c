/* Seeds for fuzz_hf_config: one byte choosing the file (see fuzz_hf_config.c)
 * followed by its JSON, shaped like real Hugging Face files: a llama config
 * with rope scaling and null fields, a multimodal one with text_config, a
 * generation config with a list of eos ids, tokenizer configs with string
 * and named chat templates, and a shard index matching the target's shards. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const struct {
  unsigned char file;
  const char *json;
} seeds[] = {
    {0,
     "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
     " \"hidden_size\": 4096, \"num_hidden_layers\": 32, \"rms_norm_eps\": 1e-05,\n"
     " \"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"llama3\",\n"
     " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192},\n"
     " \"tie_word_embeddings\": false, \"sliding_window\": null,\n"
     " \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009]}\n"},
    {0, "{\"model_type\": \"gemma3\", \"text_config\": {\"num_hidden_layers\": 26,\n"
        " \"eos_token_id\": 1, \"layer_types\": [1, 2, 3]}, \"huge\": 1e400, \"x\": NaN}"},
    {1, "{\"bos_token_id\": 1, \"eos_token_id\": [2, 32000], \"pad_token_id\": -1,\n"
        " \"temperature\": 0.6, \"do_sample\": true}"},
    {2, "{\"eos_token\": \"</s>\", \"model_max_length\": 1000000000000000019884624838656,\n"
        " \"chat_template\": \"{% for m in messages %}{{ m['content'] }}{% endfor %}\"}"},
    {2, "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"},\n"
        " {\"name\": \"tool_use\", \"template\": \"T\"}]}"},
    {3, "{\"chat_template\": \"{{ messages }}\"}"},
    {4, "{\"metadata\": {\"total_size\": 64}, \"weight_map\": {\n"
        " \"model.embed_tokens.weight\": \"a.safetensors\",\n"
        " \"model.layers.0.mlp.up_proj.weight\": \"a.safetensors\",\n"
        " \"model.norm.weight\": \"b.safetensors\", \"lm_head.weight\": \"b.safetensors\"}}"},
    {4, "{\"weight_map\": {\"model.norm.weight\": \"../b.safetensors\"}}"},
};

int fuzz_write_seeds(const char *dir) {
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    unsigned char buf[1024];
    size_t n = strlen(seeds[i].json);
    if (n + 1 > sizeof buf) return 1;
    buf[0] = seeds[i].file;
    memcpy(buf + 1, seeds[i].json, n);
    char name[32];
    snprintf(name, sizeof name, "seed%zu.json", i);
    if (fuzz_seed_save(dir, name, buf, n + 1)) return 1;
  }
  return 0;
}
