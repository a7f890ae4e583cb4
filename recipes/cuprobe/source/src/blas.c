/* cuprobe._blas: a small SGEMM through cuBLAS, row-major in and out. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>

static int to_floats(PyObject *seq, Py_ssize_t expected, float *out, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return -1;
    if (PySequence_Fast_GET_SIZE(fast) != expected) {
        PyErr_Format(PyExc_ValueError, "%s has %zd values, expected %zd", what, PySequence_Fast_GET_SIZE(fast),
                     expected);
        Py_DECREF(fast);
        return -1;
    }
    for (Py_ssize_t i = 0; i < expected; i++) {
        out[i] = (float)PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
    }
    Py_DECREF(fast);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *version(PyObject *self, PyObject *args) {
    int v = 0;
    /* cublasGetProperty needs no handle, so no GPU. */
    int major = 0, minor = 0, patch = 0;
    cublasGetProperty(MAJOR_VERSION, &major);
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    v = major * 10000 + minor * 100 + patch;
    return PyLong_FromLong(v);
}

/* sgemm(m, n, k, a, b) -> list: C = A (m x k) @ B (k x n), all row-major. */
static PyObject *sgemm(PyObject *self, PyObject *args) {
    int m, n, k;
    PyObject *a_obj, *b_obj;
    if (!PyArg_ParseTuple(args, "iiiOO", &m, &n, &k, &a_obj, &b_obj)) return NULL;
    size_t sa = (size_t)m * k, sb = (size_t)k * n, sc = (size_t)m * n;
    float *host = malloc(sizeof(float) * (sa + sb + sc));
    if (!host) return PyErr_NoMemory();
    float *ha = host, *hb = host + sa, *hc = host + sa + sb;
    if (to_floats(a_obj, (Py_ssize_t)sa, ha, "a") < 0 || to_floats(b_obj, (Py_ssize_t)sb, hb, "b") < 0) {
        free(host);
        return NULL;
    }
    float *da = NULL, *db = NULL, *dc = NULL;
    cublasHandle_t handle = NULL;
    const char *failed = NULL;
    cublasStatus_t bs;
    if (cudaMalloc((void **)&da, sizeof(float) * sa) || cudaMalloc((void **)&db, sizeof(float) * sb) ||
        cudaMalloc((void **)&dc, sizeof(float) * sc)) {
        failed = "cudaMalloc";
    } else if (cudaMemcpy(da, ha, sizeof(float) * sa, cudaMemcpyHostToDevice) ||
               cudaMemcpy(db, hb, sizeof(float) * sb, cudaMemcpyHostToDevice)) {
        failed = "cudaMemcpy to device";
    } else if ((bs = cublasCreate(&handle)) != CUBLAS_STATUS_SUCCESS) {
        failed = "cublasCreate";
    } else {
        const float alpha = 1.0f, beta = 0.0f;
        /* Row-major C = A B is column-major C^T = B^T A^T. */
        if (cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, db, n, da, k, &beta, dc, n) !=
            CUBLAS_STATUS_SUCCESS) {
            failed = "cublasSgemm";
        } else if (cudaMemcpy(hc, dc, sizeof(float) * sc, cudaMemcpyDeviceToHost)) {
            failed = "cudaMemcpy to host";
        }
    }
    if (handle) cublasDestroy(handle);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    if (failed) {
        cudaError_t last = cudaGetLastError();
        free(host);
        return PyErr_Format(PyExc_RuntimeError, "%s failed: %s", failed, cudaGetErrorString(last));
    }
    PyObject *result = PyList_New((Py_ssize_t)sc);
    for (size_t i = 0; i < sc; i++) PyList_SET_ITEM(result, (Py_ssize_t)i, PyFloat_FromDouble(hc[i]));
    free(host);
    return result;
}

static PyMethodDef methods[] = {
    {"version", version, METH_NOARGS, "cuBLAS version as major*10000 + minor*100 + patch."},
    {"sgemm", sgemm, METH_VARARGS, "sgemm(m, n, k, a, b): row-major A (m x k) @ B (k x n) on the GPU."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe._blas", NULL, -1, methods};

PyMODINIT_FUNC PyInit__blas(void) { return PyModule_Create(&module); }
