"""An extension module on the stable ABI (Python 3.10 and newer) that links the CUDA runtime. Its python_requires
is older than the matrix's, as torchsort's is: setuptools lets it win over the rendered pyproject's."""

import os

from setuptools import Extension, setup

cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
setup(
    name="stablelib",
    version="2.0.0",
    description="A stable-ABI extension module that links the CUDA runtime",
    packages=["stablelib"],
    python_requires=">=3.7",
    ext_modules=[
        Extension(
            "stablelib._runtime",
            ["src/runtime.c"],
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            include_dirs=[os.path.join(cuda, "include")],
            library_dirs=[os.path.join(cuda, "lib64")],
            libraries=["cudart"],
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
