/* On the stable ABI of Python 3.10 (Py_LIMITED_API, set by setup.py): PyModule_AddObjectRef is of 3.10's. */
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

PyMODINIT_FUNC PyInit__runtime(void) {
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddObjectRef(created, "stable_abi", Py_True) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
