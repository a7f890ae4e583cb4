"""Extensions only; the metadata is pyproject.toml's."""

import os

from setuptools import Extension, setup

cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
setup(
    ext_modules=[
        Extension("multipkg._flags", ["multipkg/_flags.c"]),
        Extension(
            "multipkgx._runtime",
            ["multipkgx/_runtime.c"],
            include_dirs=[os.path.join(cuda, "include")],
            library_dirs=[os.path.join(cuda, "lib64")],
            libraries=["cudart"],
        ),
    ]
)
