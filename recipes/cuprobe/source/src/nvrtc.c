/* cuprobe._nvrtc: compile CUDA C++ at run time to a CUBIN for one architecture; no host compiler needed. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <nvrtc.h>
#include <stdlib.h>

static PyObject *version(PyObject *self, PyObject *args) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    return Py_BuildValue("(ii)", major, minor);
}

/* compile(source, name, arch) -> bytes: arch like "sm_90"; CUBIN, so the driver need not JIT newer PTX. */
static PyObject *compile(PyObject *self, PyObject *args) {
    const char *source, *name, *arch;
    if (!PyArg_ParseTuple(args, "sss", &source, &name, &arch)) return NULL;
    char option[64];
    PyOS_snprintf(option, sizeof option, "--gpu-architecture=%s", arch);
    const char *options[] = {option};
    nvrtcProgram program;
    nvrtcResult status = nvrtcCreateProgram(&program, source, name, 0, NULL, NULL);
    if (status != NVRTC_SUCCESS) {
        return PyErr_Format(PyExc_RuntimeError, "nvrtcCreateProgram: %s", nvrtcGetErrorString(status));
    }
    status = nvrtcCompileProgram(program, 1, options);
    if (status != NVRTC_SUCCESS) {
        size_t log_size = 0;
        nvrtcGetProgramLogSize(program, &log_size);
        char *log = malloc(log_size + 1);
        if (log) {
            log[0] = 0;
            nvrtcGetProgramLog(program, log);
        }
        PyErr_Format(PyExc_RuntimeError, "NVRTC could not compile %s for %s: %s\n%s", name, arch,
                     nvrtcGetErrorString(status), log ? log : "");
        free(log);
        nvrtcDestroyProgram(&program);
        return NULL;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(program, &size);
    PyObject *cubin = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (cubin) nvrtcGetCUBIN(program, PyBytes_AS_STRING(cubin));
    nvrtcDestroyProgram(&program);
    return cubin;
}

static PyMethodDef methods[] = {
    {"version", version, METH_NOARGS, "NVRTC (major, minor)."},
    {"compile", compile, METH_VARARGS, "compile(source, name, arch) -> CUBIN bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuprobe._nvrtc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nvrtc(void) { return PyModule_Create(&module); }
