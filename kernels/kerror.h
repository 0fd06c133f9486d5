/* Messages for the kernel launchers' statuses (kernels/kerror.cu). */
#ifndef BRISK_KERNELS_KERROR_H
#define BRISK_KERNELS_KERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* A static message for a launcher's nonzero status: CUDA's error string on
 * the device; in the emulation the reason the last failed launch on this
 * thread gave (bad configuration, misused warp operation, deadlock), or the
 * code's name when no launch failed (a launcher refusing a type or a k). */
const char *brisk_kerror_string(int status);

#ifdef __cplusplus
}
#endif

#endif
