/* Seeds for fuzz_grammar: one byte choosing the kind (0 GBNF, 1 JSON Schema,
 * 2 regex, see fuzz_grammar.c) followed by the text: grammars in the shapes
 * of llama.cpp's examples (JSON, lists, arithmetic, repetitions, classes,
 * escapes, comments), schemas with every supported keyword, and patterns. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const struct {
  unsigned char kind;
  const char *text;
} seeds[] = {
    {0, "root ::= object\nobject ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws "
        "value )* )? \"}\"\nvalue ::= object | string | [0-9]+ | \"true\"\nstring ::= \"\\\"\" "
        "[^\"\\\\\\x00-\\x1F]* \"\\\"\"\nws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
    {0, "root ::= item+\n# a comment\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ "
        "\"\\n\"\n"},
    {0, "root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] term)*\nterm  ::= "
        "ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\nnum   ::= [0-9]+ "
        "ws\nws    ::= [ \\t\\n]*\n"},
    {0, "root ::= \"1. \" move{2,4} \"\\n\"\nmove ::= [NBKQR]? [a-h] [1-8] [+#]? \" \"?\n"},
    {0, "root ::= [ぁ-ゟ]+ (\"\\U0001F600\" | \"\\u00e9\" | .)?\n"},
    {0, "root ::=\n  a |\n  ( b\n    c )\na ::= \"x\"{,3}\nb ::= \"y\"{2,}\nc ::= \"\"\n"},
    {1, "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": "
        "8}, \"age\": {\"type\": \"integer\", \"minimum\": -3, \"maximum\": 120}, \"tags\": "
        "{\"type\": \"array\", \"items\": {\"enum\": [\"a\", 1, null]}, \"minItems\": 1, "
        "\"maxItems\": 3}}, \"required\": [\"name\"]}"},
    {1, "{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"kids\": {\"type\": "
        "\"array\", \"items\": {\"$ref\": \"#/$defs/n\"}}}}}, \"$ref\": \"#/$defs/n\"}"},
    {1, "{\"anyOf\": [{\"type\": \"string\", \"format\": \"date-time\"}, {\"type\": "
        "\"number\", \"exclusiveMinimum\": 0.5, \"exclusiveMaximum\": 10}, {\"const\": [1, "
        "{\"a\": true}]}, {\"type\": \"string\", \"pattern\": \"^[A-Z]{2}\\\\d+$\"}]}"},
    {1, "{\"type\": [\"object\", \"null\"], \"additionalProperties\": {\"type\": \"boolean\"}}"},
    {2, "[a-z]+@[a-z]+\\.(com|org)"},
    {2, "^(?:\\d{1,3}\\.){3}\\d{1,3}$"},
    {2, "(?P<x>[^\\]\\\\]{2,5})*?|\\w+\\s\\W"},
    {2, "a{,3}b{2}c+?\\x41\\u00e9."},
};

int fuzz_write_seeds(const char *dir) {
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    unsigned char buf[2048];
    size_t n = strlen(seeds[i].text);
    if (n + 1 > sizeof buf) return 1;
    buf[0] = seeds[i].kind;
    memcpy(buf + 1, seeds[i].text, n);
    char name[32];
    snprintf(name, sizeof name, "seed%zu.txt", i);
    if (fuzz_seed_save(dir, name, buf, n + 1)) return 1;
  }
  return 0;
}
