#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *library_name(PyObject *self, PyObject *args) { return PyUnicode_FromString("libdatalib.so"); }

static PyMethodDef methods[] = {{"library_name", library_name, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "datalib._host", NULL, -1, methods};

PyMODINIT_FUNC PyInit__host(void) { return PyModule_Create(&module); }
