/* Seeds for fuzz_wordpiece: a BERT-style tokenizer.json (BertNormalizer,
 * BertPreTokenizer, TemplateProcessing, special added tokens) and a
 * vocab.txt, each followed by a text with accents, CJK, punctuation,
 * controls and a special token. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const char *json =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true},{\"id\":1,\"content\":"
    "\"[UNK]\",\"special\":true},{\"id\":2,\"content\":\"[CLS]\",\"special\":true},{\"id\":3,"
    "\"content\":\"[SEP]\",\"special\":true}],\"normalizer\":{\"type\":\"BertNormalizer\","
    "\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":{\"type\":"
    "\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":"
    "0}}],\"special_tokens\":{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2]},\"[SEP]\":{\"id\":"
    "\"[SEP]\",\"ids\":[3]}}},\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\","
    "\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":8,\"vocab\":{\"[PAD]\":0,"
    "\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":4,\"##b\":5,\"cafe\":6,\"\\u4e2d\":7,\",\":8,"
    "\"ab\":9,\"##s\":10}}}";
static const char *vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##s\nw\n##orld\n!\n";
static const char *texts[] = {"Ab abs, CAFÉ 中文\t\x01x [SEP]abbbbbbbbbbbbb", "Hellos World!\xff"};

int fuzz_write_seeds(const char *dir) {
  int bad = 0;
  const char *srcs[] = {json, vocab};
  for (size_t i = 0; i < 2; i++) {
    char buf[4096];
    size_t sl = strlen(srcs[i]), tl = strlen(texts[i]);
    buf[0] = (char)(1 | (i ? 6 : 0));
    memcpy(buf + 1, srcs[i], sl);
    buf[1 + sl] = 0;
    memcpy(buf + 2 + sl, texts[i], tl);
    char name[32];
    snprintf(name, sizeof name, "wordpiece-%zu", i);
    bad |= fuzz_seed_save(dir, name, buf, 2 + sl + tl);
  }
  return bad;
}
