/* cuprobe.cuda._nccl: the optional NCCL module. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <nccl.h>

static PyObject *version(PyObject *self, PyObject *args) {
    int v = 0;
    ncclResult_t status = ncclGetVersion(&v);
    if (status != ncclSuccess) return PyErr_Format(PyExc_RuntimeError, "ncclGetVersion: %s", ncclGetErrorString(status));
    return PyLong_FromLong(v);
}

static PyMethodDef methods[] = {
    {"version", version, METH_NOARGS, "NCCL version code (e.g. 22703 for 2.27.3)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe.cuda._nccl", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nccl(void) { return PyModule_Create(&module); }
