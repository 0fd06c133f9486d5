/* Seeds for fuzz_vocab_hf: small tokenizer.json files in the shapes real
 * ones have (byte-level BPE with a Split regex and added tokens, an SPM-like
 * BPE with Prepend/Replace normalizers and a decoder sequence, chained
 * Replace normalizers, a WhitespaceSplit), each followed by a text. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const char *jsons[] = {
    "{\"added_tokens\":[{\"id\":6,\"content\":\"<|end|>\",\"special\":true},{\"id\":7,"
    "\"content\":\"<x>\",\"special\":false,\"lstrip\":true,\"rstrip\":true}],\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
    "{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,"
    "3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
    "\"behavior\":"
    "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
    "\"use_regex\":false}]},\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\","
    "\"unk_token\":null,\"vocab\":{\"a\":0,\"b\":1,\"\\u0120\":2,\"ab\":3,\"\\u0120ab\":4,\"c\":5},"
    "\"merges\":[\"a b\",\"\\u0120 ab\"]}}",
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":"
    "\"<s>\",\"special\":true}],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":"
    "\"Prepend\",\"prepend\":\"\\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
    "\"content\":\"\\u2581\"}]},\"pre_tokenizer\":null,\"post_processor\":{\"type\":"
    "\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":"
    "\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},\"decoder\":{\"type\":\"Sequence\",\"decoders\":"
    "[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},{\"type\":"
    "\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,"
    "\"stop\":0}]},\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,"
    "\"fuse_unk\":true,\"vocab\":{\"<unk>\":0,\"<s>\":1,\"<0x41>\":2,\"\\u2581\":3,\"h\":4,\"i\":5,"
    "\"\\u2581h\":6,\"\\u2581hi\":7},\"merges\":[\"\\u2581 h\",\"\\u2581h i\"]}}",
    "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":"
    "{\"String\":\"a\"},\"content\":\"aa\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},"
    "\"content\":\"aa\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aa\"}]}"
    ","
    "\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},\"model\":{\"type\":\"BPE\",\"unk_token\":"
    "null,\"vocab\":{\"a\":0,\"aa\":1,\" \":2},\"merges\":[\"a a\"]}}",
};
static const char *texts[] = {"ab ab<|end|>c <x> ba", "hi hi A zz", "a a aaa"};

int fuzz_write_seeds(const char *dir) {
  int bad = 0;
  for (size_t i = 0; i < sizeof jsons / sizeof jsons[0]; i++) {
    char buf[8192];
    size_t jl = strlen(jsons[i]), tl = strlen(texts[i]);
    buf[0] = (char)(i & 3);
    memcpy(buf + 1, jsons[i], jl);
    buf[1 + jl] = 0;
    memcpy(buf + 2 + jl, texts[i], tl);
    char name[32];
    snprintf(name, sizeof name, "tokenizer-%zu", i);
    bad |= fuzz_seed_save(dir, name, buf, 2 + jl + tl);
  }
  return bad;
}
