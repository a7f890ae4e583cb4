// The op's CUDA kernel, on the current stream of the tensor's device (the stable ABI's C shim gives it).
#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

using torch::stable::Tensor;

__global__ void scale_kernel(const float* in, float* out, float alpha, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = in[i] * alpha;
  }
}

Tensor scale_cuda(const Tensor& x, double alpha) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float, "scale: x must be float32");
  STD_TORCH_CHECK(x.is_contiguous(), "scale: x must be contiguous");
  Tensor out = torch::stable::empty_like(x);
  int64_t n = x.numel();
  if (n == 0) {
    return out;
  }
  void* stream = nullptr;
  STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream) == AOTI_TORCH_SUCCESS,
                  "scale: no current CUDA stream");
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  scale_kernel<<<static_cast<unsigned int>(blocks), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const float*>(x.data_ptr()), reinterpret_cast<float*>(out.data_ptr()),
      static_cast<float>(alpha), n);
  cudaError_t launched = cudaGetLastError();
  STD_TORCH_CHECK(launched == cudaSuccess, "scale: the kernel did not launch: ", cudaGetErrorString(launched));
  return out;
}

STABLE_TORCH_LIBRARY_IMPL(stableop, CUDA, m) {
  m.impl("scale", TORCH_BOX(&scale_cuda));
}
