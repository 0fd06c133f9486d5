"""Build hook: a wheel built from a checkout carries the checkout's
libbrisk.so ($BRISK_LIBRARY, else ../../build/libbrisk.so) inside the package,
so that `pip install ./bindings/python` after `ninja -C build` is
self-contained. Without a built library the package is pure Python and finds
libbrisk at run time ($BRISK_LIBRARY or the system's library path)."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    for path in (os.environ.get("BRISK_LIBRARY"),
                 os.path.join(HERE, "..", "..", "build", "libbrisk.so")):
        if path and os.path.isfile(path):
            return os.path.realpath(path)
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib:
            shutil.copyfile(lib, os.path.join(self.build_lib, "brisk", "libbrisk.so"))


class MaybeBinary(Distribution):
    # A bundled library makes the wheel platform-specific.
    def has_ext_modules(self):
        return built_library() is not None


setup(cmdclass={"build_py": BuildPy}, distclass=MaybeBinary)
