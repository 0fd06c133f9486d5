/* brisk_estimate_memory: the bytes a model and one context will count
 * against the memory limits, from the file's header and metadata. */
#include "context/context.h"

#include "core/abi.h"
#include "core/error.h"
#include "model/load.h"
#include "model/model.h"
#include "model/source.h"

#include <string.h>
#include <sys/stat.h>

BRISK_API brisk_status brisk_estimate_memory(const char *path,
                                             const brisk_model_params *model_params,
                                             const brisk_context_params *ctx_params,
                                             brisk_memory_estimate *out) {
  if (!path || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_estimate_memory: path and out must be set");
  brisk_status st = brisk_abi_check_out(&brisk_abi_memory_estimate, out);
  if (st) return st;
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  if (model_params && (st = brisk_abi_read(&brisk_abi_model_params, model_params, &mp))) return st;
  /* The model's own bookkeeping (metadata, vocabulary, tensor tables,
   * converted vectors) is measured, not modelled: the file is mapped with
   * nothing rewritten, which reads the header and metadata and no weight
   * page, and what that load allocates is what the real one allocates
   * besides the weights. */
  brisk_model_params scratch = mp;
  scratch.progress = NULL;
  scratch.use_mmap = 1;
  scratch.repack = 0;
  scratch.device = NULL;
  scratch.memory_limit = 0;
  brisk_model *m = NULL;
  if ((st = brisk_model_load(path, &scratch, &m))) return st;
  brisk_memory_estimate e = {.struct_size = sizeof e};
  e.model_other = brisk_model_memory_used(m);
  const uint64_t weights = mp.vocab_only ? 0 : brisk_model_weight_bytes(m);
  struct stat sb;
  const bool gguf = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
  if (mp.vocab_only) {
    e.weights = 0;
  } else if (!mp.use_mmap) {
    /* GGUF: the whole file is read (page-aligned, in one block); a folder:
     * each weight is copied. Repacking then rewrites them in place. */
    e.weights = gguf ? (uint64_t)sb.st_size + 4096 + 32 : weights;
  } else if (mp.repack && brisk_model_source_is_mapped(m->source)) {
    /* Rewritten pages of the mapping, when they fit repacking's budget. */
    uint64_t r = brisk_model_repack_bytes(m);
    e.weights = r <= brisk_model_repack_budget(m) ? r : 0;
  }
  e.mapped = mp.use_mmap && weights > e.weights ? weights - e.weights : 0;
  if (!mp.vocab_only) st = brisk_context_estimate(m, ctx_params, &e.kv, &e.buffers);
  brisk_model_free(m);
  if (st) return st;
  e.total = e.weights + e.model_other + e.kv + e.buffers;
  return brisk_abi_write(&brisk_abi_memory_estimate, out, &e);
}
