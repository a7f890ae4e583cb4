#include <Python.h>
#include <cuda_runtime_api.h>

static PyObject *runtime_version(PyObject *self, PyObject *args) {
    int version = 0;
    cudaRuntimeGetVersion(&version);
    return PyLong_FromLong(version);
}

static PyMethodDef methods[] = {{"runtime_version", runtime_version, METH_NOARGS, "cudaRuntimeGetVersion"},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_runtime", "links libcudart", -1, methods};

PyMODINIT_FUNC PyInit__runtime(void) { return PyModule_Create(&module); }
