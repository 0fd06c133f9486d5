/* Sequence snapshots: one sequence's tokens, positions and K/V in a
 * versioned byte format that does not depend on the block size or on which
 * blocks held it (docs/snapshots.md has the layout):
 *
 *   header (64 bytes, little-endian)
 *     0  "BRISKSEQ"        8  u32 version (2)     12 u32 header bytes (64)
 *     16 u64 model fingerprint                    24 u32 brisk_kv_type
 *     28 u32 n_layer       32 u32 n_head_kv       36 u32 head_dim
 *     40 u32 n_tokens      44 u32 flags (0)       48 u64 payload bytes
 *     56 u64 XXH64 of bytes 0 .. 56
 *   payload
 *     i32 tokens[n_tokens], i32 positions[n_tokens]
 *     per layer: K rows [n_tokens][n_head_kv][row bytes], then V rows
 *   trailer: u64 chained checksum (each section's XXH64 seeded with the
 *     previous one's, from the header's)
 *
 * Version 2 stores 8-bit K/V rows rotated (quant/kv_quant.h), as the cache
 * holds them; version 1 stored them unrotated. Import still reads version 1
 * for F16 and F32 caches, whose rows did not change.
 *
 * Import reads and checks everything before it touches the context, so a
 * bad snapshot changes nothing. */
#include "context/context.h"
#include "context/swap.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/hash.h"
#include "model/model.h"

#include <stdio.h>
#include <string.h>

#define SNAP_MAGIC "BRISKSEQ"
#define SNAP_VERSION 2u
#define SNAP_HEADER 64u

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static uint64_t mix(uint64_t h, const void *p, size_t n) { return brisk_hash64(p, n, h); }

/* Identifies the model across processes and load options (placement,
 * repacking): architecture, hyper-parameters, each tensor's name, file
 * type and shape, and the vocabulary's token texts. Two files that differ
 * only in weight values (fine-tunes of one base) are not told apart. */
static uint64_t model_fingerprint(const brisk_model *m) {
  const brisk_hparams *hp = &m->hp;
  const uint32_t u[] = {(uint32_t)hp->arch,
                        hp->n_vocab,
                        hp->n_ctx_train,
                        hp->n_embd,
                        hp->n_layer,
                        hp->n_head,
                        hp->n_head_kv,
                        hp->head_dim,
                        hp->n_ff,
                        hp->n_expert,
                        hp->n_expert_used,
                        hp->rope_dim,
                        (uint32_t)hp->rope_style,
                        (uint32_t)hp->rope_scaling,
                        hp->rope_orig_ctx,
                        hp->sliding_window,
                        hp->tied_embeddings};
  const float f[] = {hp->rms_eps,
                     hp->rope_base,
                     hp->rope_factor,
                     hp->rope_low_freq_factor,
                     hp->rope_high_freq_factor,
                     hp->yarn_beta_fast,
                     hp->yarn_beta_slow,
                     hp->yarn_attn_factor};
  uint64_t h = mix(0x5eed5eed5eedull, u, sizeof u);
  h = mix(h, f, sizeof f);
  /* Cross-layer KV sharing changes what the K/V sections hold (mixed in
   * only when used, so other models keep their fingerprints). */
  if (hp->n_kv_shared) h = mix(h, &hp->n_kv_shared, sizeof hp->n_kv_shared);
  const int64_t n = brisk_model_n_tensors(m);
  for (int64_t i = 0; i < n; i++) {
    brisk_tensor_info t = {.struct_size = sizeof t};
    if (brisk_model_tensor(m, i, &t) != BRISK_OK) continue;
    h = mix(h, t.name, strlen(t.name));
    h = mix(h, t.type, strlen(t.type));
    h = mix(h, t.dims, sizeof t.dims);
    h = mix(h, &t.n_bytes, sizeof t.n_bytes);
  }
  /* The vocabulary: models of one shape with other tokenizers differ. */
  char piece[256];
  for (int32_t tok = 0; tok < (int32_t)hp->n_vocab; tok++) {
    size_t len = 0;
    brisk_status st =
        brisk_token_to_piece(m, tok, BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &len);
    if (st == BRISK_OK)
      h = mix(h, piece, len);
    else if (st == BRISK_E_BUFFER_TOO_SMALL)
      h = mix(h, &len, sizeof len);
    else
      break; /* no vocabulary: the shapes decide */
  }
  return h;
}

/* Sizes of one snapshot of this context's model. */
typedef struct snap_geom {
  size_t row_bytes;     /* one token's K (or V) of one layer: n_head_kv rows */
  size_t section_bytes; /* n_tokens of those */
  uint64_t payload;     /* tokens, positions and 2 n_layer sections */
} snap_geom;

static bool geometry(const brisk_context *c, const brisk_kv_layout *l, uint32_t n_tokens,
                     snap_geom *g) {
  const brisk_model *m = brisk_context_model(c);
  g->row_bytes = (size_t)l->n_kv_heads * brisk_kvq_row_bytes(l->dtype, l->head_dim);
  uint64_t sec, kvb, total;
  if (brisk_mul_overflow_u64(g->row_bytes, n_tokens, &sec) || sec > SIZE_MAX ||
      brisk_mul_overflow_u64(sec, 2ull * m->hp.n_layer, &kvb) ||
      brisk_add_overflow_u64(kvb, 8ull * n_tokens, &total))
    return false;
  g->section_bytes = (size_t)sec;
  g->payload = total;
  return true;
}

/* Copies between the cache rows of sequence positions [0, n) (block table
 * `table`, block size bs) and token-major rows of one layer's K or V:
 * out: cache -> rows, else rows -> cache. One transfer per block. */
static brisk_status move_rows(brisk_context *c, uint32_t layer, int kv_i, const int32_t *table,
                              int32_t n, unsigned char *rows, unsigned char *block_buf, int out) {
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  const brisk_kv_layout *l = &st->layout;
  const size_t rb = brisk_kvq_row_bytes(l->dtype, l->head_dim);
  const size_t bb = (size_t)l->n_kv_heads * (size_t)l->block_size * rb;
  const size_t tok_bytes = (size_t)l->n_kv_heads * rb;
  brisk_backend *be = brisk_context_layer_backend(c, layer);
  unsigned char *pool = kv_i ? st->v[layer] : st->k[layer];
  for (int32_t b = 0; (int64_t)b * l->block_size < n; b++) {
    int32_t t0 = b * l->block_size, nt = n - t0 < l->block_size ? n - t0 : l->block_size;
    unsigned char *dev = pool + (size_t)table[b] * bb;
    brisk_status s;
    if (out && (s = be->download(be, block_buf, dev, bb))) return s;
    for (int32_t t = 0; t < nt; t++)
      for (int32_t h = 0; h < l->n_kv_heads; h++) {
        unsigned char *cache_row = block_buf + ((size_t)h * (size_t)l->block_size + (size_t)t) * rb;
        unsigned char *tok_row = rows + (size_t)(t0 + t) * tok_bytes + (size_t)h * rb;
        if (out)
          memcpy(tok_row, cache_row, rb);
        else
          memcpy(cache_row, tok_row, rb);
      }
    if (!out && (s = be->upload(be, dev, block_buf, bb))) return s;
  }
  return BRISK_OK;
}

static brisk_status check_ctx_seq(const brisk_context *c, int32_t seq, const char *what) {
  if (!c) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: context is NULL", what);
  int32_t n_seq = brisk_context_get_params(c)->n_seq_max;
  if (seq < 0 || seq >= n_seq)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: sequence id %d is outside [0, %d)", what, seq,
                       n_seq);
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts((brisk_context *)c, &kv, &st);
  if (brisk_kv_seq_windowed(kv, seq, NULL, NULL))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: sequence %d has a window (attention sinks); a snapshot holds a whole "
                       "sequence",
                       what, seq);
  /* The other ranks' K/V (their heads, or their stages' layers) is not in
   * this context's storage. */
  if (brisk_context_is_split(c))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: not with tensor or pipeline parallelism yet (the K/V is spread over "
                       "the ranks)",
                       what);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_seq_export_to(brisk_context *c, int32_t seq, brisk_seq_write_fn write,
                                           void *user_data) {
  brisk_status s = check_ctx_seq(c, seq, "brisk_seq_export");
  if (s) return s;
  if (!write) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_export: write is NULL");
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  const brisk_model *m = brisk_context_model(c);
  const int32_t n = brisk_kv_seq_len(kv, seq);
  if (n < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_export: sequence %d is empty", seq);
  snap_geom g;
  if (!geometry(c, &st->layout, (uint32_t)n, &g)) return brisk_error_oom();
  const brisk_kv_layout *l = &st->layout;
  const size_t bb =
      (size_t)l->n_kv_heads * (size_t)l->block_size * brisk_kvq_row_bytes(l->dtype, l->head_dim);
  unsigned char hdr[SNAP_HEADER] = {0};
  memcpy(hdr, SNAP_MAGIC, 8);
  put32(hdr + 8, SNAP_VERSION);
  put32(hdr + 12, SNAP_HEADER);
  put64(hdr + 16, model_fingerprint(m));
  put32(hdr + 24, (uint32_t)brisk_context_get_params(c)->kv_type);
  put32(hdr + 28, m->hp.n_layer);
  put32(hdr + 32, m->hp.n_head_kv);
  put32(hdr + 36, m->hp.head_dim);
  put32(hdr + 40, (uint32_t)n);
  put64(hdr + 48, g.payload);
  put64(hdr + 56, brisk_hash64(hdr, 56, 0));
  uint64_t chain = get64(hdr + 56);
  int32_t *ids = brisk_malloc((size_t)n * 2 * sizeof *ids); /* tokens, then positions */
  unsigned char *rows = brisk_malloc(g.section_bytes), *block = brisk_malloc(bb);
  if (!ids || !rows || !block) {
    s = brisk_error_oom();
    goto done;
  }
  brisk_kv_seq_tokens(kv, seq, ids);
  for (int32_t p = 0; p < n; p++) ids[n + p] = p;
  unsigned char *le = (unsigned char *)ids; /* little-endian in place */
  for (int32_t i = 0; i < 2 * n; i++) put32(le + 4 * (size_t)i, (uint32_t)ids[i]);
  int32_t n_blocks;
  const int32_t *table = brisk_kv_block_table(kv, seq, &n_blocks);
  if (write(user_data, hdr, sizeof hdr) || write(user_data, ids, (size_t)n * 8)) goto io;
  chain = mix(chain, ids, (size_t)n * 8);
  for (uint32_t layer = 0; layer < m->hp.n_layer; layer++)
    for (int kv_i = 0; kv_i < 2; kv_i++) {
      if ((s = move_rows(c, layer, kv_i, table, n, rows, block, 1))) goto done;
      if (write(user_data, rows, g.section_bytes)) goto io;
      chain = mix(chain, rows, g.section_bytes);
    }
  unsigned char tail[8];
  put64(tail, chain);
  if (write(user_data, tail, sizeof tail)) goto io;
  goto done;
io:
  s = brisk_error(BRISK_E_IO, "brisk_seq_export: the writer failed");
done:
  brisk_free(ids);
  brisk_free(rows);
  brisk_free(block);
  return s;
}

typedef struct buf_io {
  unsigned char *p;
  size_t cap, at;
} buf_io;

static int buf_write(void *u, const void *data, size_t n) {
  buf_io *b = u;
  if (n > b->cap - b->at) return 1;
  memcpy(b->p + b->at, data, n);
  b->at += n;
  return 0;
}

static int buf_read(void *u, void *data, size_t n) {
  buf_io *b = u;
  if (n > b->cap - b->at) return 1;
  memcpy(data, b->p + b->at, n);
  b->at += n;
  return 0;
}

BRISK_API brisk_status brisk_seq_export(brisk_context *c, int32_t seq, void *buf, size_t capacity,
                                        size_t *n_bytes) {
  brisk_status s = check_ctx_seq(c, seq, "brisk_seq_export");
  if (s) return s;
  if (!n_bytes || (capacity > 0 && !buf))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_export: n_bytes must be set, and buf when capacity > 0");
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  const int32_t n = brisk_kv_seq_len(kv, seq);
  if (n < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_export: sequence %d is empty", seq);
  snap_geom g;
  uint64_t total;
  if (!geometry(c, &st->layout, (uint32_t)n, &g) ||
      brisk_add_overflow_u64(g.payload, SNAP_HEADER + 8, &total) || total > SIZE_MAX)
    return brisk_error_oom();
  *n_bytes = (size_t)total;
  if (capacity < total)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                       "brisk_seq_export: the snapshot takes %llu bytes, the buffer holds %zu",
                       (unsigned long long)total, capacity);
  buf_io b = {buf, capacity, 0};
  return brisk_seq_export_to(c, seq, buf_write, &b);
}

static brisk_status bad(const char *fmt, unsigned long long a, unsigned long long b) {
  return brisk_error(BRISK_E_FORMAT, fmt, a, b);
}

BRISK_API brisk_status brisk_seq_import_from(brisk_context *c, int32_t seq, brisk_seq_read_fn read,
                                             void *user_data) {
  brisk_status s = check_ctx_seq(c, seq, "brisk_seq_import");
  if (s) return s;
  if (!read) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_import: read is NULL");
  brisk_kv *kv;
  brisk_forward_kv *st;
  brisk_context_kv_parts(c, &kv, &st);
  const brisk_model *m = brisk_context_model(c);
  const brisk_context_params *cp = brisk_context_get_params(c);
  if (brisk_kv_seq_len(kv, seq) != 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_import: sequence %d holds %d tokens; free it first", seq,
                       brisk_kv_seq_len(kv, seq));
  unsigned char hdr[SNAP_HEADER];
  if (read(user_data, hdr, sizeof hdr))
    return brisk_error(BRISK_E_IO, "brisk_seq_import: the snapshot ends inside its header");
  if (memcmp(hdr, SNAP_MAGIC, 8))
    return brisk_error(BRISK_E_FORMAT, "brisk_seq_import: not a brisk sequence snapshot");
  if (get64(hdr + 56) != brisk_hash64(hdr, 56, 0))
    return brisk_error(BRISK_E_FORMAT, "brisk_seq_import: the header's checksum does not match");
  const uint32_t version = get32(hdr + 8);
  if (version != SNAP_VERSION && version != 1)
    return bad("brisk_seq_import: snapshot format version %llu; this library reads versions 1 "
               "and %llu",
               version, SNAP_VERSION);
  if (version == 1 && get32(hdr + 24) != BRISK_KV_F16 && get32(hdr + 24) != BRISK_KV_F32)
    return bad("brisk_seq_import: a version 1 snapshot of an 8-bit KV cache (type %llu) holds its "
               "rows unrotated, which version 2 changed; export it again",
               get32(hdr + 24), 0);
  if (get32(hdr + 12) != SNAP_HEADER || get32(hdr + 44) != 0)
    return bad("brisk_seq_import: header of %llu bytes, flags %llu (versions 1 and 2: 64 bytes, "
               "flags 0)",
               get32(hdr + 12), get32(hdr + 44));
  if (get64(hdr + 16) != model_fingerprint(m))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_import: the snapshot is of another model (fingerprint "
                       "%016llx, this model's %016llx)",
                       (unsigned long long)get64(hdr + 16),
                       (unsigned long long)model_fingerprint(m));
  if (get32(hdr + 24) != (uint32_t)cp->kv_type)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_seq_import: the snapshot's KV cache type is %u, this context's %u "
                       "(brisk_kv_type)",
                       get32(hdr + 24), (unsigned)cp->kv_type);
  if (get32(hdr + 28) != m->hp.n_layer || get32(hdr + 32) != m->hp.n_head_kv ||
      get32(hdr + 36) != m->hp.head_dim)
    return brisk_error(BRISK_E_FORMAT,
                       "brisk_seq_import: snapshot of %u layers, %u KV heads of %u; the model has "
                       "%u, %u of %u",
                       get32(hdr + 28), get32(hdr + 32), get32(hdr + 36), m->hp.n_layer,
                       m->hp.n_head_kv, m->hp.head_dim);
  const uint32_t n = get32(hdr + 40);
  const int32_t bs = brisk_kv_block_size(kv);
  const int64_t blocks_needed = ((int64_t)n + bs - 1) / bs;
  if (n < 1 || n > INT32_MAX)
    return bad("brisk_seq_import: %llu tokens (needs 1 .. %llu)", n, INT32_MAX);
  snap_geom g;
  if (!geometry(c, &st->layout, n, &g) || get64(hdr + 48) != g.payload)
    return bad("brisk_seq_import: payload of %llu bytes; %llu tokens of this model take another "
               "size",
               get64(hdr + 48), n);
  if (blocks_needed > brisk_kv_n_free_blocks(kv))
    return brisk_error(BRISK_E_KV_FULL,
                       "brisk_seq_import: %u tokens need %lld blocks, %d are available", n,
                       (long long)blocks_needed, brisk_kv_n_free_blocks(kv));
  const brisk_kv_layout *l = &st->layout;
  const size_t bb =
      (size_t)l->n_kv_heads * (size_t)l->block_size * brisk_kvq_row_bytes(l->dtype, l->head_dim);
  /* Everything is read and checked before the context changes. */
  size_t kv_bytes = g.section_bytes * 2 * m->hp.n_layer; /* geometry checked the product */
  int32_t *ids = brisk_malloc((size_t)n * 2 * sizeof *ids);
  unsigned char *data = brisk_malloc(kv_bytes ? kv_bytes : 1), *block = brisk_malloc(bb);
  int32_t *seqs = NULL, *pos = NULL;
  int64_t *slot = NULL;
  if (!ids || !data || !block) {
    s = brisk_error_oom();
    goto done;
  }
  uint64_t chain = get64(hdr + 56);
  unsigned char tail[8];
  if (read(user_data, ids, (size_t)n * 8) || read(user_data, data, kv_bytes) ||
      read(user_data, tail, sizeof tail)) {
    s = brisk_error(BRISK_E_IO, "brisk_seq_import: the snapshot ends early");
    goto done;
  }
  chain = mix(chain, ids, (size_t)n * 8);
  for (uint32_t i = 0; i < 2 * m->hp.n_layer; i++)
    chain = mix(chain, data + (size_t)i * g.section_bytes, g.section_bytes);
  if (chain != get64(tail)) {
    s = brisk_error(BRISK_E_FORMAT, "brisk_seq_import: the snapshot's checksum does not match");
    goto done;
  }
  for (uint32_t i = 0; i < 2 * n; i++) ids[i] = (int32_t)get32((unsigned char *)ids + 4 * i);
  for (uint32_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (uint32_t)ids[i] >= m->hp.n_vocab) {
      s = bad("brisk_seq_import: token %llu is %llu, outside the vocabulary", i,
              (unsigned long long)(uint32_t)ids[i]);
      goto done;
    }
    if (ids[n + i] != (int32_t)i) {
      s = bad("brisk_seq_import: position %llu is %llu (positions run 0, 1, 2, ...)", i,
              (unsigned long long)(uint32_t)ids[n + i]);
      goto done;
    }
  }
  /* Reserve [0, n) a batch at a time, then write the rows block by block. */
  seqs = brisk_malloc((size_t)bs * sizeof *seqs);
  pos = brisk_malloc((size_t)bs * sizeof *pos);
  slot = brisk_malloc((size_t)bs * sizeof *slot);
  if (!seqs || !pos || !slot) {
    s = brisk_error_oom();
    goto done;
  }
  for (int64_t t0 = 0; !s && t0 < n; t0 += bs) {
    int32_t nt = (int32_t)(n - t0 < bs ? n - t0 : bs);
    for (int32_t t = 0; t < nt; t++) seqs[t] = seq, pos[t] = (int32_t)t0 + t;
    brisk_kv_copy copy;
    int32_t n_copies;
    s = brisk_kv_reserve(kv, nt, seqs, pos, ids + t0, slot, &copy, &n_copies);
  }
  int32_t n_blocks;
  const int32_t *table = brisk_kv_block_table(kv, seq, &n_blocks);
  for (uint32_t layer = 0; !s && layer < m->hp.n_layer; layer++)
    for (int kv_i = 0; !s && kv_i < 2; kv_i++)
      s = move_rows(c, layer, kv_i, table, (int32_t)n,
                    data + (2 * (size_t)layer + (size_t)kv_i) * g.section_bytes, block, 0);
  if (s)
    brisk_kv_seq_free(kv, seq);
  else
    brisk_kv_commit(kv, seq, 0); /* the K/V is in place: publish the full blocks */
done:
  brisk_free(ids);
  brisk_free(data);
  brisk_free(block);
  brisk_free(seqs);
  brisk_free(pos);
  brisk_free(slot);
  return s;
}

BRISK_API brisk_status brisk_seq_import(brisk_context *c, int32_t seq, const void *buf,
                                        size_t n_bytes) {
  if (!buf && n_bytes > 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_seq_import: buf is NULL");
  const unsigned char *p = buf;
  /* A buffer holds one whole snapshot: a size that disagrees with a sound
   * header is refused before anything is imported. */
  if (n_bytes >= SNAP_HEADER && !memcmp(p, SNAP_MAGIC, 8) &&
      get64(p + 56) == brisk_hash64(p, 56, 0) && get64(p + 48) <= UINT64_MAX - SNAP_HEADER - 8 &&
      get64(p + 48) + SNAP_HEADER + 8 != n_bytes)
    return brisk_error(BRISK_E_FORMAT,
                       "brisk_seq_import: the buffer has %zu bytes; its snapshot takes %llu",
                       n_bytes, (unsigned long long)(get64(p + 48) + SNAP_HEADER + 8));
  buf_io b = {(unsigned char *)(uintptr_t)buf, n_bytes, 0};
  return brisk_seq_import_from(c, seq, buf_read, &b);
}
