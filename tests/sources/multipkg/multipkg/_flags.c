#include <Python.h>

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_flags", "CUDA-free", -1, NULL};

PyMODINIT_FUNC PyInit__flags(void) { return PyModule_Create(&module); }
