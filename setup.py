"""Build tinytorch._C with CMake (pybind11, C++17) and ship the CUDA kernel sources in src/."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configure and build the extension with CMake into the place setuptools expects it."""

    def build_extension(self, ext: Extension) -> None:
        import pybind11

        out_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        werror = "ON" if os.environ.get("CI") or os.environ.get("TINYTORCH_WERROR") else "OFF"
        cmake = shutil.which("cmake") or "cmake"
        subprocess.check_call([
            cmake, ROOT,
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DTINYTORCH_WERROR={werror}",
            "-DCMAKE_BUILD_TYPE=Release",
        ], cwd=build_dir)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call([cmake, "--build", ".", "--parallel", jobs], cwd=build_dir)


class BuildPyWithKernels(build_py):
    """Copy src/*.cu into the package so CuPy can compile them at run time from an installed wheel."""

    def run(self) -> None:
        super().run()
        dest = os.path.join(self.build_lib, "tinytorch", "kernels")
        os.makedirs(dest, exist_ok=True)
        for path in glob.glob(os.path.join(ROOT, "src", "*.cu")):
            shutil.copy(path, dest)


setup(
    ext_modules=[CMakeExtension("tinytorch._C")],
    cmdclass={"build_ext": CMakeBuild, "build_py": BuildPyWithKernels},
)
