/* cuprobe._runtime: the CUDA runtime's view: versions, devices, memory. Never fails for lack of a GPU. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>

static PyObject *versions(PyObject *self, PyObject *args) {
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    /* 0 when no driver is installed: the runtime opens libcuda lazily and reports its absence. */
    cudaDriverGetVersion(&driver);
    return Py_BuildValue("{s:i,s:i}", "runtime", runtime, "driver", driver);
}

static PyObject *devices(PyObject *self, PyObject *args) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        return Py_BuildValue("{s:i,s:s,s:[]}", "count", 0, "error", cudaGetErrorString(status), "devices");
    }
    PyObject *list = PyList_New(0);
    for (int i = 0; i < count; i++) {
        struct cudaDeviceProp prop;
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        cudaSetDevice(i);
        cudaMemGetInfo(&free_bytes, &total_bytes);
        PyObject *item = Py_BuildValue("{s:i,s:s,s:i,s:i,s:K,s:K}", "index", i, "name", prop.name, "major",
                                       prop.major, "minor", prop.minor, "free_bytes",
                                       (unsigned long long)free_bytes, "total_bytes",
                                       (unsigned long long)total_bytes);
        PyList_Append(list, item);
        Py_DECREF(item);
    }
    PyObject *result = Py_BuildValue("{s:i,s:O,s:O}", "count", count, "error", Py_None, "devices", list);
    Py_DECREF(list);
    return result;
}

static PyMethodDef methods[] = {
    {"versions", versions, METH_NOARGS, "CUDA runtime and driver versions (driver 0 = none)."},
    {"devices", devices, METH_NOARGS, "Visible devices, or the runtime's reason for none."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe._runtime", NULL, -1, methods};

PyMODINIT_FUNC PyInit__runtime(void) { return PyModule_Create(&module); }
