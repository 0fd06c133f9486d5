/* The libFuzzer entry point every fuzz target defines. Built with
 * -fsanitize=fuzzer (libFuzzer's main) when -Dfuzz=enabled under clang, else
 * linked with fuzz_replay_main.c, which runs it over files and folders. A
 * target returns 0 for any input and calls abort() when it finds the library
 * breaking a promise (a crash or sanitizer report does the same). */
#ifndef BRISK_FUZZ_TARGET_H
#define BRISK_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
