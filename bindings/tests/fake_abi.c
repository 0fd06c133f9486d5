/* A stand-in for a libbrisk of another ABI major version: the bindings'
 * tests preload it (or load it in place of libbrisk) and expect a clear
 * refusal, not a crash. */
int brisk_abi_version(void);
int brisk_abi_version(void) { return 1; }
