// The op's schema, its CPU kernel, and the Python module that loads them: nothing beyond LibTorch's stable ABI
// (torch/csrc/stable) and Python's limited API.
#include <Python.h>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

using torch::stable::Tensor;

Tensor scale_cpu(const Tensor& x, double alpha) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float, "scale: x must be float32");
  STD_TORCH_CHECK(x.is_contiguous(), "scale: x must be contiguous");
  Tensor out = torch::stable::empty_like(x);
  const float* in = reinterpret_cast<const float*>(x.data_ptr());
  float* result = reinterpret_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) {
    result[i] = in[i] * static_cast<float>(alpha);
  }
  return out;
}

STABLE_TORCH_LIBRARY(stableop, m) {
  m.def("scale(Tensor x, float alpha) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(stableop, CPU, m) {
  m.impl("scale", TORCH_BOX(&scale_cpu));
}

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};

PyMODINIT_FUNC PyInit__C(void) {
  return PyModule_Create(&module);
}
