#!/usr/bin/env python3
"""Lists the device code a shared object embeds: one line per image in its
.nv_fatbin section, "sm_XY elf" or "compute_XY ptx" (sorted, unique). Reads
the ELF section table and the fatbin container format (each container: magic
0xBA55ED50, a header, then images, each with a header naming its kind, 1 PTX
or 2 ELF, and its architecture), so that it needs nothing from the CUDA
toolkit (cuobjdump is not installed everywhere nvcc is).
Usage: fatbin_archs.py LIB.so"""
import struct
import sys


def section(path, want):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)[:6]
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end].decode() == want:
            return data[off:off + size]
    return None


def images(blob):
    pos = 0
    while pos + 16 <= len(blob):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != 0xBA55ED50:
            pos += 8  # containers are 8-byte aligned; skip padding
            continue
        p, end = pos + hsize, pos + hsize + size
        while p + 32 <= end:
            kind, _, ihsize, isize = struct.unpack_from("<HHIQ", blob, p)
            arch, = struct.unpack_from("<I", blob, p + 28)
            yield kind, arch
            p += ihsize + isize
        pos = end


def main():
    blob = section(sys.argv[1], ".nv_fatbin")
    if blob is None:
        sys.exit(f"{sys.argv[1]}: no .nv_fatbin section (no device code)")
    seen = set()
    for kind, arch in images(blob):
        seen.add(f"sm_{arch} elf" if kind == 2 else f"compute_{arch} ptx" if kind == 1
                 else f"kind{kind}_{arch}")
    for s in sorted(seen):
        print(s)


if __name__ == "__main__":
    main()
