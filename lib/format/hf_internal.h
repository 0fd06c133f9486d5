/* Shared between hf.c (folder and JSON files) and hf_weights.c (shards). */
#ifndef BRISK_FORMAT_HF_INTERNAL_H
#define BRISK_FORMAT_HF_INTERNAL_H

#include "format/hf.h"

typedef struct brisk_hf_weights {
  brisk_safetensors **shards; /* [n_shards], opened in shard_names order */
  char **shard_names;         /* [n_shards] sorted file names */
  size_t n_shards;
  const brisk_safetensors_tensor **tensors; /* [n_tensors] file or weight-map order */
  const brisk_safetensors_tensor **by_name; /* [n_tensors] sorted by name */
  size_t n_tensors;
  uint64_t bytes;
} brisk_hf_weights;

/* Finds and opens the folder's weights into *w (zeroed by the caller); on
 * failure *w is left for brisk_hf_weights_free. */
brisk_status brisk_hf_weights_open(brisk_hf_weights *w, const char *dir);
void brisk_hf_weights_free(brisk_hf_weights *w);

/* dir + "/" + name, brisk_malloc'ed; NULL on OOM. */
char *brisk_hf_join(const char *dir, const char *name);

/* *exists tells whether path exists; BRISK_E_IO if stat fails for another
 * reason than absence. */
brisk_status brisk_hf_exists(const char *path, bool *exists);

#endif
