/* cuprobe._flags: build facts. It uses no CUDA at all, yet setup.py links it against every CUDA library. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *compiler(PyObject *self, PyObject *args) {
#if defined(__clang__)
    return PyUnicode_FromFormat("clang %d.%d", __clang_major__, __clang_minor__);
#elif defined(__GNUC__)
    return PyUnicode_FromFormat("gcc %d.%d", __GNUC__, __GNUC_MINOR__);
#elif defined(_MSC_VER)
    return PyUnicode_FromFormat("msvc %d", _MSC_VER);
#else
    return PyUnicode_FromString("unknown");
#endif
}

static PyMethodDef methods[] = {
    {"compiler", compiler, METH_NOARGS, "The C compiler this module was built with."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe._flags", NULL, -1, methods};

PyMODINIT_FUNC PyInit__flags(void) { return PyModule_Create(&module); }
