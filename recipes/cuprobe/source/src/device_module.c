/* cuprobe._device: Python's door to the nvcc-compiled kernel in device.cu. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

int cuprobe_device_saxpy(float a, const float *x, float *y, int n, char *error, size_t error_len);
int cuprobe_device_built_for(void);

static int to_floats(PyObject *sequence, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        double value = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(sequence, i));
        if (value == -1.0 && PyErr_Occurred()) return -1;
        out[i] = (float)value;
    }
    return 0;
}

static PyObject *saxpy(PyObject *self, PyObject *args) {
    float a;
    PyObject *x_in, *y_in;
    if (!PyArg_ParseTuple(args, "fOO", &a, &x_in, &y_in)) return NULL;
    PyObject *x_seq = PySequence_Fast(x_in, "x must be a sequence");
    PyObject *y_seq = x_seq ? PySequence_Fast(y_in, "y must be a sequence") : NULL;
    PyObject *result = NULL;
    float *x = NULL, *y = NULL;
    if (!y_seq) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(x_seq);
    if (PySequence_Fast_GET_SIZE(y_seq) != n) {
        PyErr_SetString(PyExc_ValueError, "x and y differ in length");
        goto done;
    }
    x = malloc(sizeof(float) * (n ? n : 1));
    y = malloc(sizeof(float) * (n ? n : 1));
    if (!x || !y) {
        PyErr_NoMemory();
        goto done;
    }
    if (to_floats(x_seq, x, n) || to_floats(y_seq, y, n)) goto done;
    char error[256] = "";
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = cuprobe_device_saxpy(a, x, y, (int)n, error, sizeof error);
    Py_END_ALLOW_THREADS
    if (status != 0) {
        PyErr_Format(PyExc_RuntimeError, "CUDA error %d in %s", status, error);
        goto done;
    }
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++) PyList_SET_ITEM(result, i, PyFloat_FromDouble(y[i]));
done:
    free(x);
    free(y);
    Py_XDECREF(x_seq);
    Py_XDECREF(y_seq);
    return result;
}

static PyObject *built_for(PyObject *self, PyObject *args) { return PyLong_FromLong(cuprobe_device_built_for()); }

static PyMethodDef methods[] = {
    {"saxpy", saxpy, METH_VARARGS, "a*x + y computed by the nvcc-compiled kernel on device 0."},
    {"built_for", built_for, METH_NOARGS, "CUDART_VERSION the device code was compiled against."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe._device", NULL, -1, methods};

PyMODINIT_FUNC PyInit__device(void) { return PyModule_Create(&module); }
