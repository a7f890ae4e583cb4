#include <cublas_v2.h>
#include <cuda_runtime_api.h>

__global__ void add(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}

extern "C" int vendkern_has_cuda(void) { return 1; }

extern "C" int vendkern_runtime_version(void) {
    int version = 0;
    cudaRuntimeGetVersion(&version);
    return version;
}

/* x <- factor * x + shift: cuBLAS scales, the kernel shifts. */
extern "C" int vendkern_affine(float *host, float factor, float shift, int n) {
    float *device = nullptr;
    cublasHandle_t handle;
    if (cudaMalloc(&device, n * sizeof(float)) != cudaSuccess) return -1;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return -2;
    cudaMemcpy(device, host, n * sizeof(float), cudaMemcpyHostToDevice);
    cublasSscal(handle, n, &factor, device, 1);
    add<<<(n + 255) / 256, 256>>>(device, shift, n);
    cudaError_t status = cudaMemcpy(host, device, n * sizeof(float), cudaMemcpyDeviceToHost);
    cublasDestroy(handle);
    cudaFree(device);
    return status == cudaSuccess ? 0 : -3;
}
