/* Seeds for fuzz_openai: one byte (bit 0: chat, bit 2: embeddings)
 * followed by a request body
 * using every field the mapping reads. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const struct {
  unsigned char kind;
  const char *json;
} seeds[] = {
    {0,
     "{\"model\": \"stories260K\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16,\n"
     " \"temperature\": 0.7, \"top_p\": 0.9, \"seed\": 5, \"stop\": [\"\\n\", \"The\"], \"n\": 2,\n"
     " \"logprobs\": 3, \"presence_penalty\": 0.5, \"frequency_penalty\": -0.5,\n"
     " \"logit_bias\": {\"5\": -100, \"7\": 2.5}, \"stream\": true,\n"
     " \"stream_options\": {\"include_usage\": true}, \"top_k\": 40, \"min_p\": 0.05}"},
    {0, "{\"prompt\": [1, 2, 3, 4], \"max_tokens\": 4, \"echo\": true}"},
    {0,
     "{\"prompt\": [\"a\", [5, 6], \"b\"], \"n\": 1, \"ignore_eos\": true, \"spec_n_draft\": 4}"},
    {1,
     "{\"model\": \"stories260K\", \"messages\": [{\"role\": \"system\", \"content\": \"Be "
     "brief.\"},\n"
     " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \\u00e9\"}]},\n"
     " {\"role\": \"assistant\", \"content\": \"Hello\"}, {\"role\": \"user\", \"content\": "
     "\"x\"}],\n"
     " \"max_completion_tokens\": 8, \"logprobs\": true, \"top_logprobs\": 2, \"stream\": false}"},
    {1, "{\"messages\": [{\"role\": \"developer\", \"content\": \"d\"}], \"response_format\":\n"
        " {\"type\": \"text\"}, \"stop\": \"s\", \"best_of\": 1}"},
    {4, "{\"model\": \"stories260K\", \"input\": [\"one\", \"two \\u00e9\", [1, 2, 3]],\n"
        " \"encoding_format\": \"base64\", \"user\": \"u\", \"pooling\": \"mean\", "
        "\"normalize\": false}"},
    {4, "{\"input\": \"Once upon a time\", \"encoding_format\": \"float\"}"},
    {4, "{\"input\": [5, 6, 7], \"dimensions\": 64}"},
};

int fuzz_write_seeds(const char *dir) {
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    unsigned char buf[1024];
    size_t n = strlen(seeds[i].json);
    if (n + 1 > sizeof buf) return 1;
    buf[0] = seeds[i].kind;
    memcpy(buf + 1, seeds[i].json, n);
    char name[32];
    snprintf(name, sizeof name, "seed%zu.json", i);
    if (fuzz_seed_save(dir, name, buf, n + 1)) return 1;
  }
  return 0;
}
