"""Lets the Python-driven tests of a cross build run its programs.

tools/cross-aarch64.sh puts this directory on PYTHONPATH for `meson test`.
When a test starts a program (subprocess, os.exec*) that is an ELF file
for another machine than the interpreter's, the command is prefixed with
the cross file's exe_wrapper, which meson passes to every test as
MESON_EXE_WRAPPER (qemu-aarch64 here). Nothing else changes.
"""
import os
import platform
import shlex
import subprocess

_HOST = {"x86_64": 62, "aarch64": 183}.get(platform.machine())


def _foreign(path):
    try:
        if os.sep not in path:
            return False  # looked up on PATH: the build machine's own tools
        with open(path, "rb") as f:
            head = f.read(20)
        return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") != _HOST
    except OSError:
        return False


def _wrap(argv):
    wrapper = os.environ.get("MESON_EXE_WRAPPER")
    if not wrapper or not isinstance(argv, (list, tuple)) or not argv:
        return argv
    if not _foreign(os.fspath(argv[0])):
        return argv
    return shlex.split(wrapper) + list(argv)


_Popen_init = subprocess.Popen.__init__


def _popen_init(self, args, *a, **kw):
    if kw.get("executable") is None and not kw.get("shell"):
        args = _wrap(args)
    _Popen_init(self, args, *a, **kw)


subprocess.Popen.__init__ = _popen_init

for _name in ("execv", "execve", "execvp", "execvpe"):
    _orig = getattr(os, _name, None)
    if _orig is None:
        continue

    def _exec(path, args, *rest, _orig=_orig):
        wrapped = _wrap(list(args)) if _foreign(os.fspath(path)) else args
        if wrapped is not args:
            return _orig(shlex.split(os.environ["MESON_EXE_WRAPPER"])[0], wrapped, *rest)
        return _orig(path, args, *rest)

    setattr(os, _name, _exec)
