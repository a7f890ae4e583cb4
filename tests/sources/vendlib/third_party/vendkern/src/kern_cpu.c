/* The build without VENDKERN_CUDA: the same functions, on the CPU. */
int vendkern_has_cuda(void) { return 0; }

int vendkern_runtime_version(void) { return 0; }

int vendkern_affine(float *host, float factor, float shift, int n) {
    for (int i = 0; i < n; i++) host[i] = factor * host[i] + shift;
    return 0;
}
