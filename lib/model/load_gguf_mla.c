/* deepseek2 from GGUF files as llama.cpp's converter writes them: its keys
 * ({arch}.attention.kv_lora_rank, key_length_mla, leading_dense_block_count,
 * expert_shared_count, expert_weights_scale, rope.scaling.yarn_log_multiplier,
 * ...) and tensors (attn_q or attn_q_a / attn_q_a_norm / attn_q_b,
 * attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b or its split attn_k_b (stored
 * transposed) and attn_v_b, ffn_*_exps, ffn_*_shexp). mla_attention reads
 * kv_b as float32 [n_head][nope + v][rank]: it is rebuilt into memory the
 * model owns, rows widened by the CPU backend's embed (any type it reads). */
#include "model/load_gguf_mla.h"
#include "model/load.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "backend/device.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static brisk_status key_u32(const brisk_gguf *g, const char *arch, const char *suffix,
                            bool required, uint32_t *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  brisk_status st = brisk_gguf_get_u32(g, key, out);
  if (st == BRISK_E_NOT_FOUND && !required) return BRISK_OK;
  if (st == BRISK_E_NOT_FOUND) return brisk_error(st, "GGUF key '%s' is missing", key);
  return st;
}

static brisk_status key_f32(const brisk_gguf *g, const char *arch, const char *suffix, float *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  brisk_status st = brisk_gguf_get_f32(g, key, out);
  return st == BRISK_E_NOT_FOUND ? BRISK_OK : st;
}

brisk_status brisk_gguf_mla_hparams(const brisk_gguf *g, const char *arch, brisk_hparams *hp) {
  uint32_t key_mla = 0, v_mla = 0, key_len = 0, v_len = 0, n_shared = 0, gating = 1;
  brisk_status st;
  if ((st = key_u32(g, arch, "attention.q_lora_rank", false, &hp->q_lora_rank)) ||
      (st = key_u32(g, arch, "attention.kv_lora_rank", true, &hp->kv_lora_rank)) ||
      (st = key_u32(g, arch, "attention.key_length", true, &key_len)) ||
      (st = key_u32(g, arch, "attention.value_length", true, &v_len)) ||
      (st = key_u32(g, arch, "attention.key_length_mla", false, &key_mla)) ||
      (st = key_u32(g, arch, "attention.value_length_mla", false, &v_mla)) ||
      (st = key_u32(g, arch, "rope.dimension_count", true, &hp->rope_dim)) ||
      (st = key_u32(g, arch, "expert_shared_count", false, &n_shared)) ||
      (st = key_u32(g, arch, "expert_gating_func", false, &gating)) ||
      (st = key_u32(g, arch, "expert_group_count", false, &hp->moe_n_group)) ||
      (st = key_u32(g, arch, "expert_group_used_count", false, &hp->moe_topk_group)) ||
      (st = key_f32(g, arch, "expert_weights_scale", &hp->moe_scale)))
    return st;
  /* Older conversions give the per-head sizes as key/value_length; newer
   * ones the latent (MQA) view there and the heads in the _mla keys. */
  const uint32_t qk = key_mla ? key_mla : key_len, v = v_mla ? v_mla : v_len;
  const uint32_t r = hp->kv_lora_rank, dr = hp->rope_dim;
  if (r == 0 || dr == 0 || dr % 2 || qk <= dr || v == 0 || (r + dr) % 2 || r > BRISK_MAX_HEAD_DIM ||
      qk > BRISK_MAX_HEAD_DIM || v > BRISK_MAX_HEAD_DIM)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: %s kv_lora_rank %u, key length %u, rope dims %u, value length %u: "
                       "each 1..%d, rope even and below the key length, rank + rope even",
                       arch, r, qk, dr, v, BRISK_MAX_HEAD_DIM);
  if (gating != 1)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "GGUF: %s.expert_gating_func %u is not supported (1, softmax, is)", arch,
                       gating);
  if (hp->moe_n_group <= 1) hp->moe_n_group = hp->moe_topk_group = 0;
  if (hp->moe_n_group &&
      (hp->n_expert % hp->moe_n_group || hp->moe_topk_group == 0 ||
       hp->moe_topk_group > hp->moe_n_group ||
       hp->n_expert_used > hp->moe_topk_group * (hp->n_expert / hp->moe_n_group)))
    return brisk_error(BRISK_E_FORMAT,
                       "GGUF: %s expert groups %u (%u used) do not fit %u experts, %u per token",
                       arch, hp->moe_n_group, hp->moe_topk_group, hp->n_expert, hp->n_expert_used);
  hp->head_dim = qk;
  hp->mla_nope_dim = qk - dr;
  hp->mla_v_dim = v;
  hp->n_head_kv = hp->n_head;
  hp->n_ff_shexp = n_shared * hp->n_ff_exp;
  /* llama.cpp's YaRN for deepseek2: cos and sin unscaled, the logits by
   * (1 + yarn_log_multiplier ln factor)^2 (its mscale_all_dim term). */
  double scale = 1.0 / sqrt((double)qk);
  if (hp->rope_scaling == BRISK_HP_ROPE_SCALING_YARN && hp->rope_factor > 1) {
    float log_mul = 0;
    if ((st = key_f32(g, arch, "rope.scaling.yarn_log_multiplier", &log_mul))) return st;
    const double lf = log((double)hp->rope_factor), ms = 1 + (double)log_mul * lf;
    hp->yarn_attn_factor = (float)(1.0 / (1 + 0.1 * lf));
    scale *= ms * ms;
  }
  hp->attn_scale = (float)scale;
  return BRISK_OK;
}

/* All rows of a [rows][cols] tensor of the file as floats into dst. */
static brisk_status rows_f32(brisk_backend *cpu, const brisk_gguf_tensor *t, int64_t rows,
                             int64_t cols, float *dst) {
  if (rows > INT32_MAX) return brisk_error(BRISK_E_FORMAT, "tensor '%s': too many rows", t->name);
  int32_t *ids = brisk_malloc((size_t)rows * sizeof *ids);
  if (!ids) return brisk_error_oom();
  for (int64_t i = 0; i < rows; i++) ids[i] = (int32_t)i;
  brisk_status st = cpu->embed(cpu, t->type, t->data, rows, cols, ids, (int32_t)rows, dst);
  brisk_free(ids);
  return st;
}

static const brisk_gguf_tensor *find_3d(const brisk_gguf *g, const char *name, uint64_t ne0,
                                        uint64_t ne1, uint64_t ne2, brisk_status *st) {
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, name);
  if (!t) return NULL;
  bool ok = t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1;
  if (!ok)
    *st = brisk_error(BRISK_E_FORMAT,
                      "tensor '%s' has shape [%llu, %llu, %llu, %llu]; expected [%llu, %llu, %llu]",
                      name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                      (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
                      (unsigned long long)ne0, (unsigned long long)ne1, (unsigned long long)ne2);
  return t;
}

brisk_status brisk_gguf_mla_kv_b(brisk_model *m, const brisk_gguf *g, uint32_t il, float **out,
                                 brisk_weight *w) {
  const brisk_hparams *hp = &m->hp;
  const int64_t h_n = hp->n_head, r = hp->kv_lora_rank, dn = hp->mla_nope_dim, dv = hp->mla_v_dim,
                dkb = dn + dv;
  char name[96];
  brisk_status st = BRISK_OK;
  snprintf(name, sizeof name, "blk.%u.attn_kv_b.weight", il);
  const brisk_gguf_tensor *kvb = find_3d(g, name, (uint64_t)r, (uint64_t)(h_n * dkb), 1, &st);
  const brisk_gguf_tensor *kb = NULL, *vb = NULL;
  if (st) return st;
  if (!kvb) {
    snprintf(name, sizeof name, "blk.%u.attn_k_b.weight", il);
    kb = find_3d(g, name, (uint64_t)dn, (uint64_t)r, (uint64_t)h_n, &st);
    if (st) return st;
    snprintf(name, sizeof name, "blk.%u.attn_v_b.weight", il);
    vb = find_3d(g, name, (uint64_t)r, (uint64_t)dv, (uint64_t)h_n, &st);
    if (st) return st;
    if (!kb || !vb)
      return brisk_error(BRISK_E_FORMAT,
                         "layer %u: tensor 'blk.%u.attn_kv_b.weight' (or attn_k_b and attn_v_b) "
                         "is missing",
                         il, il);
  }
  size_t n, bytes;
  if (brisk_mul_overflow_size((size_t)(h_n * dkb), (size_t)r, &n) ||
      brisk_mul_overflow_size(n, sizeof(float), &bytes))
    return brisk_error_oom();
  float *f = brisk_aligned_alloc(64, bytes);
  /* k_b and v_b: staged whole, then placed head by head. */
  float *tmp = kvb ? NULL : brisk_malloc(bytes);
  brisk_backend *cpu = NULL;
  brisk_device_ref host = brisk_device_cpu();
  if (!f || (!kvb && !tmp)) {
    st = brisk_error_oom();
  } else if (!(st = brisk_device_backend_create(&host, NULL, &cpu))) {
    if (kvb) {
      st = rows_f32(cpu, kvb, h_n * dkb, r, f);
    } else if (!(st = rows_f32(cpu, kb, h_n * r, dn, tmp))) {
      /* k_b row (h, c) holds K_h[., c] (transposed); v_b row (h, v) is V_h[v]. */
      for (int64_t h = 0; h < h_n; h++)
        for (int64_t c = 0; c < r; c++)
          for (int64_t d = 0; d < dn; d++) f[(h * dkb + d) * r + c] = tmp[(h * r + c) * dn + d];
      if (!(st = rows_f32(cpu, vb, h_n * dv, r, tmp)))
        for (int64_t h = 0; h < h_n; h++)
          memcpy(f + (h * dkb + dn) * r, tmp + h * dv * r, (size_t)(dv * r) * sizeof(float));
    }
  }
  brisk_backend_free(cpu);
  brisk_free(tmp);
  if (st) {
    brisk_aligned_free(f);
    return st;
  }
  *out = f; /* the caller's, bound or not */
  return brisk_model_bind_check(m, kvb ? kvb->name : kb->name, f, BRISK_DTYPE_F32, r, h_n * dkb,
                                false, w);
}
