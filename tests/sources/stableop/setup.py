"""A PyTorch extension on LibTorch's stable ABI: a custom op, scale(x, alpha) = x * alpha, with a CPU kernel and a
CUDA kernel, registered with STABLE_TORCH_LIBRARY. It uses nothing of torch's C++ API nor of Python's beyond the
stable ABI (one cp310-abi3 module), so one wheel runs on every torch from the one it targets on: the build defines
TORCH_TARGET_VERSION (the factory does, from the recipe)."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="stableop",
    version="0.3.0",
    description="A stable-ABI PyTorch custom op with a CUDA kernel",
    packages=["stableop"],
    python_requires=">=3.10",
    ext_modules=[
        CUDAExtension(
            "stableop._C",
            ["csrc/ops.cpp", "csrc/scale_cuda.cu"],
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            # aoti_torch_get_current_cuda_stream is declared for CUDA builds only.
            extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O2", "-DUSE_CUDA"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
