/* The stream handle of the kernel launchers: a cudaStream_t on CUDA (NULL is
 * the default stream), ignored by the SIMT emulation. A plain C header so
 * that the host side and the tests can call launchers without CUDA headers. */
#ifndef BRISK_KERNELS_KSTREAM_H
#define BRISK_KERNELS_KSTREAM_H

typedef void *brisk_kstream;

#endif
