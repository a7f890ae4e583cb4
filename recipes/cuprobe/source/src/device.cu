/* Device code compiled by nvcc at build time: a kernel and its host launcher, linking libcudart dynamically.
 * The extension module cuprobe._device (device_module.c) calls cuprobe_device_saxpy. */
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void saxpy_kernel(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

static int failed(cudaError_t status, const char *what, char *error, size_t error_len) {
    snprintf(error, error_len, "%s: %s", what, cudaGetErrorString(status));
    return (int)status;
}

/* y = a*x + y on device 0; 0 on success, else the CUDA error, described in `error`. */
extern "C" int cuprobe_device_saxpy(float a, const float *x, float *y, int n, char *error, size_t error_len) {
    float *dx = NULL, *dy = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    cudaError_t status;
    if ((status = cudaMalloc((void **)&dx, bytes)) != cudaSuccess) return failed(status, "cudaMalloc", error, error_len);
    if ((status = cudaMalloc((void **)&dy, bytes)) != cudaSuccess) {
        cudaFree(dx);
        return failed(status, "cudaMalloc", error, error_len);
    }
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(a, dx, dy, n);
    status = cudaGetLastError();
    if (status == cudaSuccess) status = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    return status == cudaSuccess ? 0 : failed(status, "saxpy_kernel", error, error_len);
}

/* The CUDA runtime this module was compiled against (CUDART_VERSION), e.g. 12040. */
extern "C" int cuprobe_device_built_for(void) { return CUDART_VERSION; }
