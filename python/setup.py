"""Builds the package with its library inside (replaydb/lib/libreplaydb.so),
so that ``pip install`` then ``import replaydb`` works with nothing installed
system-wide and no environment variables. The library comes from, in order:

  1. REPLAYDB_LIBRARY: a built libreplaydb.so to package;
  2. REPLAYDB_BUILD_DIR, or the repository's build/ beside this folder: its
     lib/libreplaydb.so (after ``bash tools/scripts/build.sh``);
  3. otherwise CMake builds it from the repository this folder sits in (only
     the library; Release; REPLAYDB_CMAKE_ARGS adds CMake arguments, e.g.
     -DREPLAYDB_WITH_CUDA=OFF), with the progress printed.

and with it the module of per-batch calls in C that the build puts beside it
(_speedups.abi3.so, for CPython >= 3.11's stable ABI; older Pythons use
ctypes alone). Everything else is in pyproject.toml. The wheel is one for
every Python 3 of the platform (py3-none-<platform>).
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _say(text: str) -> None:
    print(f"replaydb setup: {text}", file=sys.stderr, flush=True)


def _cmake_build(work: Path) -> Path:
    if not (ROOT / "CMakeLists.txt").exists():
        raise SystemExit(
            "replaydb setup: no libreplaydb.so to put in the package: set REPLAYDB_LIBRARY to a "
            "built one, or install from the repository's python/ folder (beside its "
            "CMakeLists.txt), where CMake builds it")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("replaydb setup: building libreplaydb.so needs cmake "
                         "(tools/scripts/install-deps.sh installs what the build needs)")
    build = work / "cmake-build"
    args = [cmake, "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
            "-DREPLAYDB_BUILD_TESTS=OFF", "-DREPLAYDB_WERROR=OFF"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if shutil.which("ccache"):
        args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
    args += shlex.split(os.environ.get("REPLAYDB_CMAKE_ARGS", ""))
    _say(f"configuring {ROOT} in {build}")
    subprocess.run(args, check=True, stdout=sys.stderr)
    _say("building libreplaydb.so (the library alone; minutes on a small machine)")
    subprocess.run([cmake, "--build", str(build), "--target", "replaydb_shared", "-j",
                    str(os.cpu_count() or 1)], check=True, stdout=sys.stderr)
    return build / "lib" / "libreplaydb.so"


def _library(work: Path) -> Path:
    given = os.environ.get("REPLAYDB_LIBRARY")
    if given:
        lib = Path(given)
        if not lib.is_file():
            raise SystemExit(f"replaydb setup: REPLAYDB_LIBRARY={given} is no file")
        return lib.resolve()
    build_dir = os.environ.get("REPLAYDB_BUILD_DIR")
    lib = Path(build_dir or ROOT / "build") / "lib" / "libreplaydb.so"
    if lib.is_file():
        return lib.resolve()
    if build_dir:
        raise SystemExit(f"replaydb setup: REPLAYDB_BUILD_DIR={build_dir} has no "
                         "lib/libreplaydb.so")
    return _cmake_build(work).resolve()


class BuildPy(build_py):
    """The Python files, and the library into replaydb/lib/."""

    def run(self) -> None:
        super().run()
        lib = _library(Path(self.build_temp if hasattr(self, "build_temp") else "build")
                       .resolve())
        dest = Path(self.build_lib) / "replaydb" / "lib"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest / "libreplaydb.so")
        _say(f"packaged {lib}")
        # The per-batch calls in C, which the build puts beside the library
        # (without Python's headers there is none: the package uses ctypes).
        speedups = lib.parent / "_speedups.abi3.so"
        if speedups.is_file():
            shutil.copyfile(speedups, dest / speedups.name)
            _say(f"packaged {speedups}")
        else:
            _say(f"no {speedups} (no python3-dev at build time): the package will use ctypes")


commands = {"build_py": BuildPy}
try:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        """A platform wheel for every Python 3 (the library is loaded by ctypes)."""

        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    commands["bdist_wheel"] = BdistWheel
except ImportError:  # no wheel package: pip installs without building a wheel
    pass

setup(cmdclass=commands)
