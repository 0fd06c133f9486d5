#include "core/half.h"

void brisk_f16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = brisk_f16_to_f32(src[i]);
}
void brisk_f32_to_f16_array(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = brisk_f32_to_f16(src[i]);
}
void brisk_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = brisk_bf16_to_f32(src[i]);
}
void brisk_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = brisk_f32_to_bf16(src[i]);
}
