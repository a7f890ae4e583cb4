"""Measure the compiler cache on device code and print the figures.

A package whose device code is heavy, as CuPy's CUB/Thrust modules are: thrust::sort and thrust::reduce for four
types, compiled by nvcc for the six default GPU architectures of CUDA 12 (about two minutes on two cores). Its
cuda12x wheel is built four times, against a compiler cache of its own:
  1. without the compiler cache,
  2. with an empty cache (cold: it fills it),
  3. the second Python of the same variant (cp311 after cp312): the device code is the same,
  4. cp312 again (a warm rebuild).
Each figure is the build step (cibuildwheel in the build image); the toolkit is provisioned before.

Usage: python bench/bench_compiler_cache.py [--image manylinux-offline:latest] [--matrix matrix-offline.yaml]
(needs Docker; about six minutes)
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

from benchlib import REPO, arguments, show

from wheelfactory.pipeline import BuildRequest, build
from wheelfactory.plan import copy_inputs

RECIPE = """
name: sortbench
version: "0.1.0"
import: sortbench
source: {path: source}
components: [cudart]
modules:
  sortbench._sort: [cudart]
smoke:
  gpu_free: ["import sortbench"]
"""

SORT_CU = r"""
#include <thrust/device_vector.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <cstdint>
template <typename T> static double sorted_sum(const T *data, int n) {
    thrust::device_vector<T> values(data, data + n);
    thrust::sort(values.begin(), values.end());
    return (double)thrust::reduce(values.begin(), values.end());
}
extern "C" double sort_f32(const float *d, int n) { return sorted_sum(d, n); }
extern "C" double sort_f64(const double *d, int n) { return sorted_sum(d, n); }
extern "C" double sort_i32(const int32_t *d, int n) { return sorted_sum(d, n); }
extern "C" double sort_i64(const int64_t *d, int n) { return sorted_sum(d, n); }
"""

SETUP_PY = r"""
import os, subprocess
from pathlib import Path
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

cuda = Path(os.environ["CUDA_HOME"])

class BuildWithNvcc(build_ext):
    def build_extension(self, ext):
        obj = Path(self.build_temp) / "sort.o"
        obj.parent.mkdir(parents=True, exist_ok=True)
        gencode = os.environ["NVCC_GENCODE"].split()
        command = [str(cuda / "bin/nvcc"), "-c", "sort.cu", "-o", str(obj), "-O2", "-Xcompiler", "-fPIC"]
        subprocess.check_call([*command, *gencode])
        ext.extra_objects.append(str(obj))
        super().build_extension(ext)

setup(
    packages=["sortbench"],
    ext_modules=[Extension("sortbench._sort", ["module.c"], include_dirs=[str(cuda / "include")],
                           library_dirs=[str(cuda / "lib64")], libraries=["cudart", "stdc++"])],
    cmdclass={"build_ext": BuildWithNvcc},
)
"""

MODULE = r"""
#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sortbench._sort", NULL, -1, NULL};
double sort_f32(const float *d, int n);
PyMODINIT_FUNC PyInit__sort(void) { (void)sort_f32; return PyModule_Create(&module); }
"""


def _project(scratch: Path) -> Path:
    root = copy_inputs(REPO, scratch / "project")
    source = root / "recipes" / "sortbench" / "source"
    (source / "sortbench").mkdir(parents=True)
    (source.parent / "recipe.yaml").write_text(RECIPE)
    (source / "sortbench" / "__init__.py").write_text("")
    (source / "sort.cu").write_text(SORT_CU)
    (source / "module.c").write_text(MODULE)
    (source / "setup.py").write_text(SETUP_PY)
    return root


def main() -> int:
    args = arguments()
    figures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="wf-bench-cache-") as scratch_text:
        scratch = Path(scratch_text)
        root = _project(scratch)
        os.environ["WHEELFACTORY_COMPILER_CACHE_DIR"] = str(scratch / "compiler-cache")
        runs = [
            ("cp312, no compiler cache", "3.12", False),
            ("cp312, empty compiler cache (cold)", "3.12", True),
            ("cp311 after cp312 (second Python of the variant)", "3.11", True),
            ("cp312 again (warm rebuild)", "3.12", True),
        ]
        for label, python, cache in runs:
            request = BuildRequest(root, 12, [python], ["sortbench"], args.image, None, root / args.matrix)
            (record,) = build(dataclasses.replace(request, compiler_cache=cache))
            assert record.passed, record.why_not()
            stats = record.built.run.compiler_cache if record.built.run else None
            detail = "no cache"
            if isinstance(stats, dict):
                by_language = stats["by_language"]
                assert isinstance(by_language, dict)
                device = [v for k, v in by_language.items() if k != "C/C++"]
                hits = sum(v["hits"] for v in device)
                detail = f"device code: {hits} of {hits + sum(v['misses'] for v in device)} compilations from the cache"
            figures.append((f"build step, {label}", f"{record.built.timings['build']:6.1f} s  ({detail})"))
    show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
