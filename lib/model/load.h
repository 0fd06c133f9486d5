/* Shared pieces of the model loaders (GGUF, Hugging Face). */
#ifndef BRISK_MODEL_LOAD_H
#define BRISK_MODEL_LOAD_H

#include "model/model.h"

typedef struct brisk_gguf brisk_gguf;
typedef struct brisk_hf brisk_hf;

/* GGUF files; buffers made at load (deepseek2's float32 kv_b) are appended
 * to *owned (the source frees them). */
brisk_status brisk_model_load_gguf(brisk_model *m, const brisk_gguf *g,
                                   const brisk_model_params *params, void ***owned, size_t *n_owned,
                                   size_t *cap_owned);

/* Binds GGUF tensor `name`: a vector of `cols` (rows 0) or a [rows][cols]
 * matrix, its shape and type checked; an absent optional tensor leaves
 * w->data NULL. */
brisk_status brisk_model_gguf_bind(brisk_model *m, const brisk_gguf *g, const char *name,
                                   int64_t cols, int64_t rows, bool required, brisk_weight *w);
/* BERT-family encoders from GGUF (model/load_gguf_bert.c), as llama.cpp's
 * converter writes arch "bert": hyper-parameters, pooling, tensors. */
brisk_status brisk_model_load_gguf_bert(brisk_model *m, const brisk_gguf *g,
                                        const brisk_model_params *params);

/* Hugging Face folders; buffers converted at load are appended to *owned
 * (the source frees them). */
brisk_status brisk_model_load_hf(brisk_model *m, const brisk_hf *hf,
                                 const brisk_model_params *params, void ***owned, size_t *n_owned,
                                 size_t *cap_owned);

/* Binds tensor `name` of the folder being loaded (loader: the Hugging Face
 * loader's state): a vector of `cols` (rows 0) or a [rows][cols] matrix,
 * converted and counted as the Hugging Face loader does. */
brisk_status brisk_model_hf_bind(void *loader, const char *name, int64_t cols, int64_t rows,
                                 bool required, brisk_weight *w);
/* The BERT family's hyper-parameters and tensors (model/load_bert.c), after
 * the common config.json keys were read into m->hp. */
brisk_status brisk_model_bind_bert(brisk_model *m, const brisk_hf *hf,
                                   const brisk_model_params *params, void *loader);
/* The folder's embedding defaults (sentence-transformers' files) into
 * m->embed_pooling and m->embed_max_tokens; absent files change nothing. */
brisk_status brisk_model_hf_embed_config(brisk_model *m, const brisk_hf *hf);
/* A WordPiece tokenizer from tokenizer.json (model type WordPiece) or
 * vocab.txt into m->wordpiece; BRISK_E_NOT_FOUND when the folder has
 * neither. */
brisk_status brisk_model_hf_wordpiece(brisk_model *m, const brisk_hf *hf);

/* Validates hyper-parameters read from any source (non-zero sizes, heads
 * divide evenly, sane bounds), naming the offending value. */
brisk_status brisk_model_check_hparams(const brisk_hparams *hp);
/* Each per-pair RoPE factor of a bound rope_freqs vector (none: OK) is
 * finite and positive. */
brisk_status brisk_model_check_rope_freqs(const brisk_weight *w);

/* Fills *w for data of `type` holding rows x cols, after checking that the
 * type can be computed with (matrices) or is a float type (vectors); counts
 * parameters and bytes into the model. */
brisk_status brisk_model_bind_check(brisk_model *m, const char *name, const void *data,
                                    uint32_t type, int64_t cols, int64_t rows, bool vector,
                                    brisk_weight *w);

/* Rows [r0, r0 + n) of a bound matrix as a weight of its own (a view into
 * the same bytes, counted once): the q/k/v or gate/up parts of a fused
 * projection (phi3). */
brisk_weight brisk_weight_rows(const brisk_weight *w, int64_t r0, int64_t n);

brisk_status brisk_model_alloc_layers(brisk_model *m);
brisk_status brisk_model_alloc_experts(brisk_model *m, brisk_layer *layer);

/* Places the weights (model/place.c): the first layers on m->device when it
 * is not the CPU (params->n_gpu_layers), the rest regrouped in place for the
 * CPU kernels when params->repack. */
brisk_status brisk_model_place(brisk_model *m, const brisk_model_params *params);
/* A model cut into tensor-parallel ranks for a GPU (m->tp_ranks): rank r's
 * shard placed wholly on the r-th device from m's (its weights, slot
 * copies and output rows in that device's memory, the host copies of the
 * slots freed); token embeddings stay on the host. */
brisk_status brisk_model_place_ranks(brisk_model *m, const brisk_model_params *params);
/* Frees what brisk_model_place put on a device. */
void brisk_model_unplace(brisk_model *m);

/* Regroups the host's weight matrices in place into the layouts the CPU kernels read
 * fastest (to _R8 where AVX2 runs), changing their types to the
 * packed ids; tied embeddings follow the output matrix. Nothing changes when
 * those matrices hold more than `budget` bytes (rewritten pages of a mapping
 * leave the page cache and become the process's own memory) or when the
 * source cannot be rewritten. */
brisk_status brisk_model_repack(brisk_model *m, uint64_t budget);
/* The bytes brisk_model_repack would rewrite (0 when nothing, or when the
 * host backend cannot be made), for brisk_estimate_memory. */
uint64_t brisk_model_repack_bytes(brisk_model *m);

/* The budget brisk_model_load gives brisk_model_repack: for a mapped file,
 * 3/4 of the memory available now (no limit when that is unknown); for a
 * file read into memory, no limit (its pages are the process's already). */
uint64_t brisk_model_repack_budget(const brisk_model *m);

/* Calls the host's progress callback; BRISK_E_CANCELLED if it says stop. */
brisk_status brisk_model_report_progress(const brisk_model_params *params, float fraction);

#endif
