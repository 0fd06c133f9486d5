/* GGUF rows <-> the regrouped layout of kernels/regroup.h. Each GGUF block
 * is a list of byte pieces, each moved to its section (Q, S or D) at a fixed
 * offset within that section's per-block record; plain types move whole
 * rows. Padding is written as zeros. */
#include "regroup.h"

#include <string.h>

enum { SEC_Q, SEC_S, SEC_D };

typedef struct piece {
  uint8_t src;     /* offset in the GGUF block */
  uint8_t len;     /* bytes */
  uint8_t section; /* SEC_Q / SEC_S / SEC_D */
  uint8_t dst;     /* offset in the section's record of this block */
} piece;

typedef struct type_pieces {
  size_t block_bytes; /* GGUF bytes per block */
  size_t rec[3];      /* record bytes per block in Q, S, D */
  int n;              /* pieces */
  piece p[4];
} type_pieces;

/* GGUF offsets from lib/quant/blocks.h (packed structs). */
static bool pieces_of(uint32_t type, type_pieces *t) {
  static const type_pieces q8_0 = {34, {32, 0, 2}, 2, {{0, 2, SEC_D, 0}, {2, 32, SEC_Q, 0}}};
  static const type_pieces q4_0 = {18, {16, 0, 2}, 2, {{0, 2, SEC_D, 0}, {2, 16, SEC_Q, 0}}};
  static const type_pieces q4_1 = {20, {16, 0, 4}, 2, {{0, 4, SEC_D, 0}, {4, 16, SEC_Q, 0}}};
  static const type_pieces q5_0 = {
      22, {16, 4, 2}, 3, {{0, 2, SEC_D, 0}, {2, 4, SEC_S, 0}, {6, 16, SEC_Q, 0}}};
  static const type_pieces q5_1 = {
      24, {16, 4, 4}, 3, {{0, 4, SEC_D, 0}, {4, 4, SEC_S, 0}, {8, 16, SEC_Q, 0}}};
  /* q4_k: d, dmin, scales[12] are the block's first 16 bytes, qs the rest. */
  static const type_pieces q4_k = {144, {128, 16, 0}, 2, {{0, 16, SEC_S, 0}, {16, 128, SEC_Q, 0}}};
  /* q5_k: d, dmin, scales[12], qh[32], qs[128]. */
  static const type_pieces q5_k = {
      176, {160, 16, 0}, 3, {{0, 16, SEC_S, 0}, {48, 128, SEC_Q, 0}, {16, 32, SEC_Q, 128}}};
  /* q6_k: ql[128], qh[64], scales[16], d. */
  static const type_pieces q6_k = {
      210,
      {192, 16, 2},
      4,
      {{0, 128, SEC_Q, 0}, {128, 64, SEC_Q, 128}, {192, 16, SEC_S, 0}, {208, 2, SEC_D, 0}}};
  switch (type) {
  case BRISK_KR_Q8_0: *t = q8_0; return true;
  case BRISK_KR_Q4_0: *t = q4_0; return true;
  case BRISK_KR_Q4_1: *t = q4_1; return true;
  case BRISK_KR_Q5_0: *t = q5_0; return true;
  case BRISK_KR_Q5_1: *t = q5_1; return true;
  case BRISK_KR_Q4_K: *t = q4_k; return true;
  case BRISK_KR_Q5_K: *t = q5_k; return true;
  case BRISK_KR_Q6_K: *t = q6_k; return true;
  default: return false;
  }
}

size_t brisk_kregroup_bytes(uint32_t type, int64_t n, int64_t k) {
  brisk_kregroup_layout l;
  return brisk_kregroup_layout_of(type, n, k, &l) ? l.bytes : 0;
}

/* Moves the row data in one direction: to_regrouped copies GGUF -> sections
 * (after zeroing dst), else sections -> GGUF. */
static int convert(uint32_t type, const void *src, int64_t n, int64_t k, void *dst,
                   bool to_regrouped) {
  brisk_kregroup_layout l;
  if (!brisk_kregroup_layout_of(type, n, k, &l)) return -1;
  if (n == 0) return 0;
  if (!src || !dst) return -1;
  uint8_t *reg = (uint8_t *)(to_regrouped ? dst : (void *)(uintptr_t)src);
  uint8_t *gguf = (uint8_t *)(to_regrouped ? (void *)(uintptr_t)src : dst);
  if (to_regrouped) memset(dst, 0, l.bytes);
  type_pieces t;
  if (!pieces_of(type, &t)) { /* plain types: one row is one piece */
    const size_t row = (size_t)k * (type == BRISK_KR_F32 ? 4 : 2);
    for (int64_t r = 0; r < n; r++) {
      uint8_t *a = gguf + (size_t)r * row, *b = reg + (size_t)r * l.q_stride;
      memcpy(to_regrouped ? b : a, to_regrouped ? a : b, row);
    }
    return 0;
  }
  const size_t stride[3] = {l.q_stride, l.s_stride, l.d_stride};
  const size_t offset[3] = {0, l.s_offset, l.d_offset};
  for (int64_t r = 0; r < n; r++) {
    for (int64_t b = 0; b < l.nb; b++) {
      uint8_t *blk = gguf + ((size_t)r * (size_t)l.nb + (size_t)b) * t.block_bytes;
      for (int i = 0; i < t.n; i++) {
        const piece *p = &t.p[i];
        uint8_t *sec = reg + offset[p->section] + (size_t)r * stride[p->section] +
                       (size_t)b * t.rec[p->section] + p->dst;
        memcpy(to_regrouped ? sec : blk + p->src, to_regrouped ? blk + p->src : sec, p->len);
      }
    }
  }
  return 0;
}

int brisk_kregroup(uint32_t type, const void *src_gguf, int64_t n, int64_t k, void *dst) {
  return convert(type, src_gguf, n, k, dst, true);
}

int brisk_kregroup_undo(uint32_t type, const void *src, int64_t n, int64_t k, void *dst_gguf) {
  return convert(type, src, n, k, dst_gguf, false);
}
