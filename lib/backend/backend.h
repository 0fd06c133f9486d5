/* The backend operation table: the seam between the forward pass, written
 * once, and the devices that run it (CPU now, CUDA later). The forward pass
 * calls only these operations, always through the table.
 *
 * Conventions for every operation:
 *  - Buffer pointers are backend memory (host pointers on the CPU backend,
 *    device pointers on CUDA), from buffer_alloc or views into it; each
 *    parameter's comment gives its shape, row-major, outermost first.
 *  - Activations are float32. Weights and KV caches carry a dtype id
 *    (core/dtype.h, GGUF numbering).
 *  - Arguments are checked (NULLs, negative or overflowing sizes, ids and
 *    slots out of range); a bad one returns BRISK_E_INVALID_ARGUMENT with a
 *    message and writes nothing. An unsupported dtype is BRISK_E_UNSUPPORTED.
 *  - Small per-step metadata (token ids, positions, slots, block tables,
 *    rope params) is host memory, so every backend can check it; a device
 *    backend mirrors it itself.
 *  - Unless a comment says otherwise, `out` may equal an input (in place)
 *    but must not partly overlap one.
 *  - Operations on one backend are not called concurrently. A backend may run
 *    them asynchronously; download and synchronize wait for earlier work.
 *  - Results do not depend on the thread count or on how many other rows or
 *    tokens are in the call: each row / query is computed in a fixed order.
 *    One documented exception: the CUDA backend's matmul takes a
 *    tensor-core path for calls of many rows, whose results agree with the
 *    small-call path to a stated tolerance (docs/cuda.md).
 */
#ifndef BRISK_BACKEND_BACKEND_H
#define BRISK_BACKEND_BACKEND_H

#include "brisk.h"
#include "quant/kv_quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest head_dim that RoPE and attention accept. */
#define BRISK_MAX_HEAD_DIM 1024
/* Most experts that moe_route_group takes (DeepSeek-V2 has 160). */
#define BRISK_MAX_EXPERTS 1024

typedef struct brisk_backend brisk_backend;

/* ---- RoPE --------------------------------------------------------------- */

typedef enum brisk_rope_layout {
  /* Rotates adjacent pairs (x[2i], x[2i+1]) (GGML "normal", original llama). */
  BRISK_ROPE_NORMAL = 0,
  /* Rotates (x[i], x[i + n_rot/2]) (GPT-NeoX, HF rotate_half). */
  BRISK_ROPE_NEOX = 1
} brisk_rope_layout;

typedef enum brisk_rope_scaling {
  BRISK_ROPE_SCALING_NONE = 0,
  BRISK_ROPE_SCALING_LINEAR = 1,  /* position interpolation: theta / factor */
  BRISK_ROPE_SCALING_LLAMA3 = 2,  /* Llama 3.1 smooth low/high-frequency rule */
  BRISK_ROPE_SCALING_YARN = 3,    /* YaRN ramp mix + attention magnitude factor */
  BRISK_ROPE_SCALING_LONGROPE = 4 /* per-pair factors (freq_factors) + a magnitude */
} brisk_rope_scaling;

/* Pair i (0 <= i < n_rot/2) of a token at position p is rotated by
 * p * f_i, with base frequency b_i = freq_base^(-2i/n_rot) / freq_factors[i]
 * (freq_factors NULL = all 1; GGUF "rope_freqs") and f_i by the scaling mode:
 *  NONE:   f_i = b_i
 *  LINEAR: f_i = b_i / factor
 *  LLAMA3: wavelength w = 2 pi / b_i; lo = orig_ctx / low_freq_factor,
 *          hi = orig_ctx / high_freq_factor: w < hi keeps b_i, w > lo gives
 *          b_i / factor, between: (1 - t) b_i / factor + t b_i with
 *          t = (orig_ctx / w - low_freq_factor) / (high - low_freq_factor)
 *          (HF _compute_llama3_parameters).
 *  YARN:   corr(r) = n_rot ln(orig_ctx / (2 pi r)) / (2 ln freq_base);
 *          lo = max(0, floor(corr(beta_fast))), hi = min(n_rot - 1,
 *          ceil(corr(beta_slow))); ramp_i = 1 - clamp((i - lo) /
 *          max(0.001, hi - lo), 0, 1); mix = ramp_i * ext_factor;
 *          f_i = b_i / factor * (1 - mix) + b_i * mix. Both cos and sin are
 *          multiplied by mscale = attn_factor * (1 + 0.1 ln(factor)) (the
 *          log term only when factor > 1), so q.k scales by mscale^2
 *          (llama.cpp ggml_rope_yarn and HF _compute_yarn_parameters with
 *          ext_factor = attn_factor = 1).
 *  LONGROPE: f_i = b_i (LongRoPE's short or long factors are the
 *          freq_factors); cos and sin are multiplied by mscale = attn_factor
 *          (HF _compute_longrope_parameters' attention_factor).
 * Angles and frequencies are computed in float64, then rounded once. */
typedef struct brisk_rope_params {
  brisk_rope_layout layout;
  int32_t n_rot;             /* rotated leading dims of each head: even, <= head_dim */
  float freq_base;           /* > 0, e.g. 10000 or 500000 */
  const float *freq_factors; /* [n_rot / 2] or NULL; host memory, each > 0 */
  brisk_rope_scaling scaling;
  float factor;                            /* context extension factor, > 0 */
  int32_t orig_ctx;                        /* pre-extension context (llama3, yarn), > 0 */
  float low_freq_factor, high_freq_factor; /* llama3: high > low */
  float ext_factor, attn_factor;           /* yarn: ramp weight (1), magnitude (1) */
  float beta_fast, beta_slow;              /* yarn: correction range (32, 1) */
} brisk_rope_params;

/* Defaults: NORMAL layout, n_rot 0 (caller sets it), base 10000, no scaling,
 * factor 1, llama3 low 1 / high 4 / orig_ctx 8192, yarn ext 1, attn 1,
 * beta_fast 32, beta_slow 1. */
void brisk_rope_params_init(brisk_rope_params *p);

/* Validates `p` for heads of head_dim, then writes each pair's frequency f_i
 * into inv_freq ([n_rot / 2]) and the cos/sin magnitude into *mscale.
 * Backends use this so that all of them rotate by the same angles. */
brisk_status brisk_rope_frequencies(const brisk_rope_params *p, int32_t head_dim, double *inv_freq,
                                    double *mscale);

/* ---- paged KV cache and attention --------------------------------------- */

/* One layer's K (or V) cache: a pool of blocks
 *   [n_blocks][n_kv_heads][block_size][head_dim] of dtype (F16 or F32), or
 *   [n_blocks][n_kv_heads][block_size] rows of brisk_kvq_row_bytes(dtype,
 *   head_dim) bytes for the quantized BRISK_KVQ_DTYPE_Q8 / _FP8 (rows as in
 *   quant/kv_quant.h: written by kv_write, widened by attention).
 * A token at position p of a sequence lives in block table[p / block_size],
 * slot p % block_size; its global slot index is block * block_size + slot. */
typedef struct brisk_kv_layout {
  uint32_t dtype; /* BRISK_DTYPE_F16, BRISK_DTYPE_F32, BRISK_KVQ_DTYPE_Q8 or _FP8 */
  int32_t n_blocks;
  int32_t n_kv_heads;
  int32_t block_size; /* tokens per block */
  int32_t head_dim;   /* <= BRISK_MAX_HEAD_DIM */
} brisk_kv_layout;

/* The query tokens of one attention call, from one or several sequences. */
typedef struct brisk_attn_batch {
  int32_t n_tokens;
  const int32_t *positions;    /* [n_tokens] position p of each query in its sequence */
  const int32_t *seq_of_token; /* [n_tokens] row of block_tables for each query */
  const int32_t *block_tables; /* [n_seqs][max_blocks] block ids (unused tail: any value) */
  int32_t n_seqs;
  int32_t max_blocks; /* row length of block_tables */
} brisk_attn_batch;

typedef struct brisk_attn_params {
  int32_t n_heads;        /* query heads: a multiple of the layout's n_kv_heads (GQA) */
  float scale;            /* logit scale; 0 means 1 / sqrt(head_dim) */
  int32_t sliding_window; /* > 0: a query at p sees keys in (p - window, p]; 0: all of 0..p */
  /* > 0: each score s = scale q.k becomes softcap * tanh(s / softcap)
   * before the softmax (Gemma 2); 0: none. Finite and >= 0. */
  float softcap;
} brisk_attn_params;

/* ---- multi-head latent attention (DeepSeek-V2) -------------------------- */

/* The latent cache of one layer: per token one row [c (rank) | k_rope
 * (rope_dim)] of D = rank + rope_dim values (even), the compressed KV
 * latent and the decoupled RoPE key shared by every head, instead of
 * per-head K and V. The row is stored in two halves: values [0, D/2) in the
 * layer's k_cache and [D/2, D) in its v_cache, each a pool of the layout
 * {dtype F16 or F32, n_blocks, n_kv_heads 1, block_size, head_dim D/2}, so
 * that block copies, swapping and snapshots handle it as any K/V pair. */
typedef struct brisk_mla_params {
  int32_t n_heads;  /* query heads */
  int32_t rank;     /* kv_lora_rank: latent values per token */
  int32_t nope_dim; /* qk_nope_head_dim: the query part matched through kv_b */
  int32_t rope_dim; /* qk_rope_head_dim: the query part matched with k_rope */
  int32_t v_dim;    /* v_head_dim */
  float scale;      /* logit scale: finite, > 0 */
} brisk_mla_params;

/* ---- activations -------------------------------------------------------- */

typedef enum brisk_glu_kind {
  BRISK_GLU_SWIGLU = 0, /* silu(gate) * up */
  BRISK_GLU_GEGLU = 1   /* gelu(gate) * up, gelu by its tanh approximation */
} brisk_glu_kind;

/* ---- weights ------------------------------------------------------------ */

/* How a backend takes a weight tensor that arrives in its file layout (GGUF
 * blocks in host memory, possibly a read-only file mapping). */
typedef enum brisk_weight_mode {
  /* The host bytes are used as stored (host-memory backends only). */
  BRISK_WEIGHT_AS_STORED = 0,
  /* weight_prepare rewrites the host bytes in place into `type` (same size);
   * optional: a backend that offers it also computes with the stored layout,
   * so the caller may use the weight as stored instead (memory budget, a
   * buffer it cannot write). */
  BRISK_WEIGHT_IN_PLACE = 1,
  /* weight_prepare copies the bytes, in `type`, into `bytes` of new backend
   * memory (a device's), freed with buffer_free. */
  BRISK_WEIGHT_COPY = 2
} brisk_weight_mode;

typedef struct brisk_weight_plan {
  brisk_weight_mode mode;
  uint32_t type; /* the dtype id the backend's ops take afterwards */
  size_t bytes;  /* COPY: backend memory the prepared weight needs */
} brisk_weight_plan;

/* ---- the table ---------------------------------------------------------- */

struct brisk_backend {
  const char *name; /* "cpu-avx2", "cpu-scalar", "cuda:0", ... */
  void *ctx;        /* the implementation's state */
  /* True when buffers are host memory that the caller may read and write
   * directly (the CPU backend); a transfer to or from such a backend needs no
   * staging copy. */
  bool host_memory;

  void (*destroy)(brisk_backend *be);

  /* Backend memory, at least 64-byte aligned; bytes > 0. */
  brisk_status (*buffer_alloc)(brisk_backend *be, size_t bytes, void **out);
  void (*buffer_free)(brisk_backend *be, void *buf); /* NULL: no-op */
  /* upload returns once src may be reused; download once dst holds the data
   * (after all earlier work). */
  brisk_status (*upload)(brisk_backend *be, void *dst /* [bytes] backend */,
                         const void *src /* [bytes] host */, size_t bytes);
  brisk_status (*download)(brisk_backend *be, void *dst /* [bytes] host */,
                           const void *src /* [bytes] backend */, size_t bytes);
  /* Waits for all queued work. */
  brisk_status (*synchronize)(brisk_backend *be);
  /* Bytes of scratch memory the backend holds now (workspaces that grow to
   * the largest operation seen). */
  size_t (*workspace_bytes)(const brisk_backend *be);

  /* How this backend takes a weight of `type` with rows x cols elements
   * (matrix: an operand of matmul, or the table of embed; else a vector: a
   * norm weight, a bias, RoPE factors, which every backend keeps as F32). */
  brisk_status (*weight_plan)(brisk_backend *be, uint32_t type, int64_t rows, int64_t cols,
                              bool matrix, brisk_weight_plan *plan);
  /* Carries out a plan from weight_plan for the same arguments: IN_PLACE
   * rewrites src (writable host memory) and sets *out = src; COPY allocates
   * plan->bytes of backend memory, fills it from src and sets *out to it;
   * AS_STORED sets *out = src. On failure nothing is allocated and src holds
   * its stored bytes. */
  brisk_status (*weight_prepare)(brisk_backend *be, const brisk_weight_plan *plan, uint32_t type,
                                 int64_t rows, int64_t cols, void *src /* [rows][row bytes] host */,
                                 void **out);

  /* y = x . W^T, W possibly quantized (rows of k elements of w_type). */
  brisk_status (*matmul)(brisk_backend *be, uint32_t w_type, const void *w /* [n][k] */, int64_t n,
                         int64_t k, const float *x /* [m][k] */, int64_t m,
                         float *y /* [m][n], not overlapping x */);

  /* Rows of a (possibly quantized) table: out[t] = table[tokens[t]]. Token
   * ids outside [0, n_vocab) are rejected. Also selects rows of activations. */
  brisk_status (*embed)(brisk_backend *be, uint32_t table_type,
                        const void *table /* [n_vocab][n_embd] */, int64_t n_vocab, int64_t n_embd,
                        const int32_t *tokens /* [n_tokens] host */, int32_t n_tokens,
                        float *out /* [n_tokens][n_embd] */);

  /* Activation columns by index: out[r][j] = x[r][cols[j]], each cols[j] in
   * [0, n_cols) (repeats allowed). GPTQ act-order: a weight whose input
   * columns were sorted by group at load multiplies the activations
   * gathered by the same permutation (n_out == n_cols). */
  brisk_status (*gather_cols)(brisk_backend *be, const float *x /* [n_rows][n_cols] */,
                              int64_t n_rows, int64_t n_cols,
                              const int32_t *cols /* [n_out] host */, int64_t n_out,
                              float *out /* [n_rows][n_out], not overlapping x */);

  /* out[r][i] = x[r][i] / sqrt(mean_i(x[r]^2) + eps) * weight[i] (weight
   * NULL: 1). eps >= 0. */
  brisk_status (*rmsnorm)(brisk_backend *be, const float *x /* [n_rows][n_cols] */,
                          const float *weight /* [n_cols] or NULL */, int64_t n_rows,
                          int64_t n_cols, float eps, float *out /* [n_rows][n_cols] */);

  /* Rotates the first n_rot dims of every head in place. x rows are
   * token_stride floats apart (>= n_heads * head_dim), so q and k may be
   * views into a fused qkv buffer. */
  brisk_status (*rope)(brisk_backend *be, float *x /* [n_tokens][token_stride] */, int32_t n_tokens,
                       int64_t token_stride, int32_t n_heads, int32_t head_dim,
                       const int32_t *positions /* [n_tokens] host, >= 0 */,
                       const brisk_rope_params *p);

  /* out = act(gate) * up elementwise. */
  brisk_status (*glu)(brisk_backend *be, brisk_glu_kind kind, const float *gate /* [n] */,
                      const float *up /* [n] */, int64_t n, float *out /* [n] */);

  /* out[r][i] = a[r][i] + b[r][i], or + b[i] when broadcast_b (a bias). */
  brisk_status (*add)(brisk_backend *be, const float *a /* [n_rows][n_cols] */,
                      const float *b /* [n_rows][n_cols] or [n_cols] */, int64_t n_rows,
                      int64_t n_cols, bool broadcast_b, float *out /* [n_rows][n_cols] */);

  /* out = x * s. */
  brisk_status (*scale)(brisk_backend *be, const float *x /* [n] */, int64_t n, float s,
                        float *out /* [n] */);

  /* out = cap * tanh(x / cap), elementwise (Gemma 2's logit soft-capping);
   * cap finite and > 0. */
  brisk_status (*softcap)(brisk_backend *be, const float *x /* [n] */, int64_t n, float cap,
                          float *out /* [n] */);

  /* out[r][i] = x[r][i] * sigmoid(g[r]): one gate per row (the shared
   * expert of Qwen-MoE models); sigmoid(g) = 1 / (1 + exp(-g)). */
  brisk_status (*sigmoid_gate)(brisk_backend *be, const float *x /* [n_rows][n_cols] */,
                               const float *g /* [n_rows] */, int64_t n_rows, int64_t n_cols,
                               float *out /* [n_rows][n_cols] */);

  /* LayerNorm over rows (BERT's post-norms): out[r][i] = (x[r][i] - mu) /
   * sqrt(var + eps) * weight[i] + bias[i], mu and var the row's mean and
   * biased variance; weight NULL: 1, bias NULL: 0. eps finite, >= 0. */
  brisk_status (*layernorm)(brisk_backend *be, const float *x /* [n_rows][n_cols] */,
                            const float *weight /* [n_cols] or NULL */,
                            const float *bias /* [n_cols] or NULL */, int64_t n_rows,
                            int64_t n_cols, float eps, float *out /* [n_rows][n_cols] */);

  /* out = x / 2 * (1 + erf(x / sqrt(2))) elementwise: the exact GELU
   * (transformers' "gelu", BERT's FFN), not the tanh form of glu's GEGLU. */
  brisk_status (*gelu)(brisk_backend *be, const float *x /* [n] */, int64_t n,
                       float *out /* [n] */);

  /* out[r] = softmax(x[r] * scale) over each row. */
  brisk_status (*softmax)(brisk_backend *be, const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                          int64_t n_cols, float scale, float *out /* [n_rows][n_cols] */);

  /* Stores token t's k and v heads at global slot slots[t] of both caches
   * (converted to the cache dtype, rounding to nearest even; quantized rows
   * exactly as brisk_kvq_quantize_row). A negative slot
   * skips the token (padding). Slots must be distinct within a call. */
  brisk_status (*kv_write)(brisk_backend *be, const brisk_kv_layout *kv,
                           void *k_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                           void *v_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                           const float *k /* [n_tokens][n_kv_heads][head_dim] */,
                           const float *v /* [n_tokens][n_kv_heads][head_dim] */,
                           const int64_t *slots /* [n_tokens] host */, int32_t n_tokens);

  /* Copy-on-write support: copies whole blocks (all KV heads) of one cache,
   * pairs[i] = {src, dst}, in order; src != dst, both in [0, n_blocks). */
  brisk_status (*kv_copy_blocks)(brisk_backend *be, const brisk_kv_layout *kv,
                                 void *cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                                 const int32_t *pairs /* [n_pairs][2] host */, int32_t n_pairs);

  /* Causal attention of each query over its own sequence's cached keys
   * (positions 0..p, or the sliding window), GQA: query head h reads kv head
   * h / (n_heads / n_kv_heads). Keys up to each query's position must have
   * been written. Softmax is computed online in float32. */
  brisk_status (*attention)(brisk_backend *be, const brisk_kv_layout *kv,
                            const void *k_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                            const void *v_cache /* [n_blocks][n_kv_heads][block_size][head_dim] */,
                            const float *q /* [n_tokens][n_heads][head_dim] */,
                            const brisk_attn_batch *batch /* host */,
                            const brisk_attn_params *params,
                            float *out /* [n_tokens][n_heads][head_dim], not overlapping q */);

  /* Stores token t's latent row [latent[t] | k_rope[t]] at global slot
   * slots[t] of the layer's two latent pools (see brisk_mla_params;
   * converted to the cache dtype, rounding to nearest even). A negative
   * slot skips the token; slots are distinct within a call. */
  brisk_status (*mla_kv_write)(brisk_backend *be, const brisk_kv_layout *kv,
                               void *k_cache /* [n_blocks][1][block_size][D/2] */,
                               void *v_cache /* [n_blocks][1][block_size][D/2] */,
                               const float *latent /* [n_tokens][rank] */,
                               const float *k_rope /* [n_tokens][rope_dim] */,
                               const int64_t *slots /* [n_tokens] host */, int32_t n_tokens,
                               const brisk_mla_params *params);

  /* Causal multi-head latent attention with the kv_b projection absorbed.
   * For query token t at position p, head h, with q_n = q[t][h][0, nope_dim)
   * and q_r = q[t][h][nope_dim, nope_dim + rope_dim) (RoPE applied), and the
   * head's slices K_h = kv_b[h][0, nope_dim) and V_h = kv_b[h][nope_dim,
   * nope_dim + v_dim) ([.][rank] each): a = K_h^T q_n ([rank]); for each key
   * j in 0..p of the sequence, s_j = scale (a . c_j + q_r . k_rope_j);
   * out[t][h] = V_h (sum_j softmax(s)_j c_j). This equals attention with
   * per-head keys [K_h c_j | k_rope_j] and values V_h c_j, which are never
   * formed. Online softmax in float32. */
  brisk_status (*mla_attention)(brisk_backend *be, const brisk_kv_layout *kv,
                                const void *k_cache /* [n_blocks][1][block_size][D/2] */,
                                const void *v_cache /* [n_blocks][1][block_size][D/2] */,
                                const float *q /* [n_tokens][n_heads][nope_dim + rope_dim] */,
                                const float *kv_b /* [n_heads][nope_dim + v_dim][rank] */,
                                const brisk_attn_batch *batch /* host */,
                                const brisk_mla_params *params,
                                float *out /* [n_tokens][n_heads][v_dim], not overlapping q */);

  /* Group-limited routing (DeepSeek-V2): p = softmax(logits[t]); the
   * n_experts experts form n_group equal groups (consecutive ids), each
   * scored by its largest p; only the topk_group best groups (ties: lower
   * group first) compete, and the k largest p among their experts are
   * chosen as moe_route does (descending, ties to the lower id), weights
   * the unrenormalized p (divided by their sum when renormalize).
   * n_group 1 is moe_route. */
  brisk_status (*moe_route_group)(brisk_backend *be,
                                  const float *logits /* [n_tokens][n_experts] */, int32_t n_tokens,
                                  int32_t n_experts, int32_t k, int32_t n_group, int32_t topk_group,
                                  bool renormalize, int32_t *ids /* [n_tokens][k] host */,
                                  float *weights /* [n_tokens][k] host */);

  /* Mixture-of-experts routing (Mixtral): p = softmax(logits[t]); the k
   * largest p, in descending order (ties: lower expert id first), into ids and
   * weights, divided by their sum when renormalize. ids and weights are host
   * memory: the forward pass groups rows by expert on the host. */
  brisk_status (*moe_route)(brisk_backend *be, const float *logits /* [n_tokens][n_experts] */,
                            int32_t n_tokens, int32_t n_experts, int32_t k, bool renormalize,
                            int32_t *ids /* [n_tokens][k] host */,
                            float *weights /* [n_tokens][k] host */);

  /* Index of each row's largest value; ties go to the lowest index, NaN counts
   * as smaller than every number (an all-NaN row gives 0). */
  brisk_status (*argmax)(brisk_backend *be, const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                         int64_t n_cols, int32_t *ids /* [n_rows] */);

  /* Each row's k largest values in descending order, ties and NaN as argmax. */
  brisk_status (*top_k)(brisk_backend *be, const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                        int64_t n_cols, int32_t k, int32_t *ids /* [n_rows][k] */,
                        float *vals /* [n_rows][k] or NULL */);

  /* Optional (NULL: not offered; the CUDA backend's graphs). step_begin and
   * step_end bracket one forward pass of n_tokens tokens whose work stays on
   * this backend: between them, operations may be recorded and run only at
   * step_end, so nothing is read back (no download, no moe_route) and the
   * host buffers passed in may be reused as soon as each call returns.
   * step_end(ok false: the pass failed in between) drops the recorded work
   * and returns BRISK_OK; otherwise it runs the step and returns its status.
   * Results are the same as without the brackets. */
  brisk_status (*step_begin)(brisk_backend *be, int32_t n_tokens);
  brisk_status (*step_end)(brisk_backend *be, bool ok);
};

/* Destroys a backend made by any create function; NULL is a no-op. */
void brisk_backend_free(brisk_backend *be);

/* Copies bytes from src (memory of backend `from`) to dst (memory of backend
 * `to`), waiting for both: directly when either side is host memory, else
 * through `staging` (host memory of at least `bytes`; NULL then is
 * BRISK_E_INVALID_ARGUMENT). */
brisk_status brisk_backend_transfer(brisk_backend *to, void *dst, brisk_backend *from,
                                    const void *src, size_t bytes, void *staging);

#endif
