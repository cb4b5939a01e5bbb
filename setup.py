"""Builds gpuplace's compiled core (the modules `gpuplace/compiled.py` lists) with Cython from
their Python source; the rest of the metadata is in pyproject.toml.

Where a module does not compile (no C compiler, no Python headers) the build says so on stderr
and installs it as Python: gpuplace runs the same code, slower. `GPUPLACE_PURE_PYTHON=1` at build
time compiles nothing. In a source tree, `make build` (run by `make test`) compiles in place
what changed since the last build.
"""

from __future__ import annotations

import glob
import os
import runpy
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CORE = runpy.run_path(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuplace", "compiled.py")
)
# Cython's directives for every compiled module: Python 3 semantics; the annotations type the
# code (a `float` is a C double), so mypy's checked types are what the compiled code relies on.
DIRECTIVES = {"language_level": 3, "annotation_typing": True}


class OptionalBuildExt(build_ext):
    """build_ext that compiles on every core and installs a module as Python when it fails."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.failed: list[Extension] = []
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        if self.inplace:  # a module not compiled now (unlisted, or Cython refused it) must not
            # go on loading its old build
            listed = {ext.name.replace(".", "/") for ext in self.extensions}
            for built in glob.glob("gpuplace/**/*.so", recursive=True):
                if built.split(".", 1)[0] not in listed:
                    os.remove(built)
                    sys.stderr.write(f"gpuplace: removed {built} (not compiled now)\n")
        super().run()

    def build_extension(self, ext: Extension) -> None:
        if self.compiler.compiler_type == "unix":  # half the compile time of -O3 -g; as fast here
            ext.extra_compile_args = [*ext.extra_compile_args, "-O2", "-g0"]
        try:
            super().build_extension(ext)
        except Exception as exc:  # any compiler failure: keep the Python module
            sys.stderr.write(
                f"gpuplace: could not compile {ext.name} ({exc}); it runs as Python (slower)\n"
            )
            self.failed.append(ext)
            old = self.get_ext_fullpath(ext.name)  # an earlier build, of older source
            if os.path.exists(old):
                os.remove(old)

    def copy_extensions_to_source(self) -> None:  # in place: not what failed (remove its old)
        built, self.extensions = (
            self.extensions,
            [e for e in self.extensions if e not in self.failed],
        )
        super().copy_extensions_to_source()
        self.extensions = built
        for ext in self.failed:
            old = self.get_ext_filename(ext.name)  # relative to the source tree: in place
            if os.path.exists(old):
                os.remove(old)
                sys.stderr.write(f"gpuplace: removed {old} (an earlier build)\n")


def extensions() -> list[object]:
    if CORE["pure_requested"]():
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.stderr.write("gpuplace: Cython is missing; the compiled core runs as Python\n")
        return []
    sources = [CORE["source"](name) for name in CORE["COMPILED"]]
    options = {"compiler_directives": DIRECTIVES, "build_dir": "build/cython", "quiet": True}
    try:
        return cythonize(sources, nthreads=os.cpu_count() or 1, **options)
    except Exception:  # Cython refused one: translate each alone, keep the rest
        out = []
        for path in sources:
            try:
                out += cythonize([path], **options)
            except Exception as exc:
                sys.stderr.write(
                    f"gpuplace: Cython could not compile {path} ({exc}); it runs as Python\n"
                )
        return out


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
