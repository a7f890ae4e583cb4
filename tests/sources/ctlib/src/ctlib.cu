#include <cuda_runtime_api.h>

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

extern "C" const char *ctlib_fetched(void) { return CTLIB_FETCHED; }

extern "C" int ctlib_runtime_version(void) {
    int version = 0;
    cudaRuntimeGetVersion(&version);
    return version;
}

extern "C" int ctlib_scale(float *host, float a, int n) {
    float *device = nullptr;
    if (cudaMalloc(&device, n * sizeof(float)) != cudaSuccess) return -1;
    cudaMemcpy(device, host, n * sizeof(float), cudaMemcpyHostToDevice);
    scale<<<(n + 255) / 256, 256>>>(device, a, n);
    cudaError_t status = cudaMemcpy(host, device, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(device);
    return status == cudaSuccess ? 0 : -2;
}
