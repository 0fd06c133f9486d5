/* Swap-to-host of one sequence's KV. A block is contiguous in each layer's
 * K and V pool ([n_blocks][n_kv_heads][block_size][head_dim]), so a copy is
 * one download or upload per block, layer and cache, whatever the dtype. */
#include "context/swap.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/kv_share.h"
#include "model/model.h"

#include <string.h>

/* Bytes of one block of one layer's K (or V) pool. */
static size_t block_bytes(const brisk_kv_layout *l) {
  return (size_t)l->n_kv_heads * (size_t)l->block_size * brisk_kvq_row_bytes(l->dtype, l->head_dim);
}

static uint32_t n_layer(const brisk_context *c) { return brisk_context_model(c)->hp.n_layer; }
static uint32_t n_kv_layers(const brisk_context *c) {
  return brisk_model_kv_layers(brisk_context_model(c));
}

size_t brisk_seq_swap_bytes(brisk_context *c, int32_t n_tokens) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  if (n_tokens < 1) return 0;
  int32_t bs = brisk_kv_block_size(kv);
  size_t n_blocks = (size_t)(((int64_t)n_tokens + bs - 1) / bs), per_block, total;
  if (brisk_mul_overflow_size(block_bytes(&st->layout), 2 * (size_t)n_kv_layers(c), &per_block) ||
      brisk_mul_overflow_size(per_block, n_blocks, &total))
    return 0;
  return total;
}

/* Copies block `block` of every layer between the pools and host[0 ..
 * 2 n_kv_layers block_bytes) ([layers holding K/V][2][block_bytes]). */
static brisk_status copy_block(brisk_context *c, int32_t block, unsigned char *host, int out) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  size_t bb = block_bytes(&st->layout), off = (size_t)block * bb;
  const brisk_model *m = brisk_context_model(c);
  size_t at = 0; /* layers sharing another's K/V have none to move */
  for (uint32_t l = 0; l < n_layer(c); l++)
    for (int kv_i = 0; kv_i < 2 && m->layers[l].kv_source == (int32_t)l; kv_i++) {
      brisk_backend *be = brisk_context_layer_backend(c, l);
      unsigned char *pool = (unsigned char *)(kv_i ? st->v[l] : st->k[l]) + off;
      unsigned char *h = host + at++ * bb;
      brisk_status s = out ? be->download(be, h, pool, bb) : be->upload(be, pool, h, bb);
      if (s) return s;
    }
  return BRISK_OK;
}

brisk_status brisk_seq_swap_out(brisk_context *c, int32_t seq, brisk_seq_swap *out) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  memset(out, 0, sizeof *out);
  /* The other ranks' KV heads live in their own storage. */
  if (brisk_context_is_split(c))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "swap out: not with tensor or pipeline parallelism yet (preemption "
                       "recomputes)");
  if (seq < 0 || seq >= brisk_kv_n_seq_max(kv))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "swap out: sequence id %d is outside [0, %d)", seq,
                       brisk_kv_n_seq_max(kv));
  if (brisk_kv_seq_windowed(kv, seq, NULL, NULL))
    return brisk_error(BRISK_E_UNSUPPORTED, "swap out: sequence %d has a window", seq);
  int32_t len = brisk_kv_seq_len(kv, seq), n_blocks;
  const int32_t *table = brisk_kv_block_table(kv, seq, &n_blocks);
  size_t bytes = brisk_seq_swap_bytes(c, len);
  if (bytes == 0)
    return brisk_error(len < 1 ? BRISK_E_INVALID_ARGUMENT : BRISK_E_OUT_OF_MEMORY,
                       "swap out: sequence %d of %d tokens has no KV to copy or too much", seq,
                       len);
  unsigned char *data = brisk_malloc(bytes); /* [n_blocks][kv layers][2][block_bytes] */
  if (!data) return brisk_error_oom();
  size_t per_block = bytes / (size_t)n_blocks;
  for (int32_t b = 0; b < n_blocks; b++) {
    brisk_status s = copy_block(c, table[b], data + (size_t)b * per_block, 1);
    if (s) {
      brisk_free(data);
      return s;
    }
  }
  *out = (brisk_seq_swap){len, n_blocks, bytes, data};
  return BRISK_OK;
}

/* Reserves positions [0, len) of the empty sequence seq, a block at a time,
 * writing the block ids to blocks[]. */
static brisk_status reserve(brisk_kv *kv, int32_t seq, int32_t len, const int32_t *tokens,
                            int32_t *blocks) {
  int32_t bs = brisk_kv_block_size(kv);
  int32_t *seqs = brisk_malloc((size_t)bs * sizeof *seqs); /* [bs] */
  int32_t *pos = brisk_malloc((size_t)bs * sizeof *pos);   /* [bs] */
  int64_t *slot = brisk_malloc((size_t)bs * sizeof *slot); /* [bs] */
  brisk_status st = BRISK_OK;
  if (!seqs || !pos || !slot) st = brisk_error_oom();
  for (int32_t b = 0; !st && b * (int64_t)bs < len; b++) {
    int32_t n = len - b * bs < bs ? len - b * bs : bs;
    for (int32_t t = 0; t < n; t++) {
      seqs[t] = seq;
      pos[t] = b * bs + t;
    }
    brisk_kv_copy copy;
    int32_t n_copies;
    st =
        brisk_kv_reserve(kv, n, seqs, pos, tokens + (size_t)b * (size_t)bs, slot, &copy, &n_copies);
    if (!st) blocks[b] = (int32_t)(slot[0] / bs);
  }
  brisk_free(seqs);
  brisk_free(pos);
  brisk_free(slot);
  return st;
}

brisk_status brisk_seq_swap_in(brisk_context *c, int32_t seq, const brisk_seq_swap *in,
                               const int32_t *tokens) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  if (seq < 0 || seq >= brisk_kv_n_seq_max(kv) || brisk_kv_seq_len(kv, seq) != 0 || !in->data ||
      !tokens || in->n_tokens < 1 || brisk_seq_swap_bytes(c, in->n_tokens) != in->bytes)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "swap in: sequence %d must be an empty sequence id and the copy (%d "
                       "tokens, %zu bytes) one of this context",
                       seq, in->n_tokens, in->bytes);
  if (in->n_blocks > brisk_kv_n_free_blocks(kv))
    return brisk_error(BRISK_E_KV_FULL, "swap in: %d blocks needed, %d are free", in->n_blocks,
                       brisk_kv_n_free_blocks(kv));
  int32_t *blocks = brisk_malloc((size_t)in->n_blocks * sizeof *blocks); /* [n_blocks] */
  if (!blocks) return brisk_error_oom();
  brisk_status s = reserve(kv, seq, in->n_tokens, tokens, blocks);
  size_t per_block = in->bytes / (size_t)in->n_blocks;
  for (int32_t b = 0; !s && b < in->n_blocks; b++)
    s = copy_block(c, blocks[b], in->data + (size_t)b * per_block, 0);
  brisk_free(blocks);
  if (s)
    brisk_kv_seq_free(kv, seq);
  else
    brisk_kv_commit(kv, seq, 0); /* the K/V is in place: publish the full blocks */
  return s;
}

/* The prefix cache's host tier copies single blocks the same way. */
static brisk_status host_download(void *user, int32_t block, void *host) {
  return copy_block(user, block, host, 1);
}

static brisk_status host_upload(void *user, int32_t block, const void *host) {
  return copy_block(user, block, (unsigned char *)(uintptr_t)host, 0);
}

brisk_status brisk_context_prefix_host_setup(brisk_context *c, uint64_t budget) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  if (budget == 0) return BRISK_OK;
  if (brisk_context_is_split(c))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "prefix_host_bytes: the prefix cache's host tier is not available with "
                       "tensor or pipeline parallelism yet (other ranks hold their own KV)");
  const brisk_kv_host_io io = {host_download, host_upload, c};
  brisk_kv_set_host_tier(kv, budget, brisk_seq_swap_bytes(c, brisk_kv_block_size(kv)), &io);
  return BRISK_OK;
}

void brisk_seq_swap_release(brisk_seq_swap *s) {
  brisk_free(s->data);
  memset(s, 0, sizeof *s);
}
