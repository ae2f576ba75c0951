/* tylo's native launch path: one CPython extension (stable ABI, Python 3.10+) that takes a
 * cached kernel launch from the Python call to cuLaunchKernel without running Python bytecode.
 *
 *   Launcher(function, cuLaunchKernel, cuLaunchKernelEx, slots, param_bytes, shared_bytes, slow)
 *       one per loaded kernel variant. ``slots`` is ((kind, offset, size), ...) as ArgPacker lays
 *       the parameters out (struct codes b B h H i I q Q f d ? and s for a byte blob); the values
 *       are written into a buffer on the C stack (so threads never share argument memory) and
 *       cuLaunchKernel is called with the GIL released. ``slow`` is the ctypes Launcher of the
 *       same kernel: a value that does not pack, or a CUDA error, is handed to it so that error
 *       messages (TypeError naming the parameter, CudaError) are those of the Python path.
 *
 *   Dispatcher(slow_launch, table, nparams, missing)
 *       one per @tylo.jit kernel; ``table`` is the kernel's dict specialisation key -> launcher.
 *       Per parameter it holds the argument type seen last and how to turn such an argument into
 *       its key part and launch value (set from Python with set_param); see the P_* codes.
 *
 *   Bound(dispatcher, grid, block, kernel)
 *       ``kernel[grid, block]``: calling it computes the specialisation key exactly as
 *       JITFunction._launch does, finds the launcher and launches. Anything unusual (a type not
 *       seen before, keyword arguments, a miss, a stale dependency, a value the C code does not
 *       handle) goes to ``slow_launch`` -- the Python path -- which is the reference behaviour.
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef int (*cu_launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared, void *stream, void **params, void **extra);
typedef int (*cu_launch_ex_t)(const void *config, void *f, void **params, void **extra);

/* cuda.h: CUlaunchConfig (56 bytes) and CUlaunchAttribute (72 bytes) */
typedef struct {
    unsigned id;
    char pad[4];
    union {
        char bytes[64];
        struct { unsigned x, y, z; } cluster;
        int programmatic;
        void *align;
    } value;
} LaunchAttribute;

typedef struct {
    unsigned grid[3], block[3], shared;
    void *stream;
    LaunchAttribute *attrs;
    unsigned num_attrs;
} LaunchConfig;

#define CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define CUDA_ERROR_INVALID_CONTEXT 201
#define STACK_PARAM_BYTES 4096
#define STACK_PARAMS 128
#define MAX_PARAMS 1024
#ifndef TYLO_NATIVE_SOURCE_DIGEST
#define TYLO_NATIVE_SOURCE_DIGEST "unknown"
#endif

/* Py_XSETREF is not in the limited API */
#define SETREF(slot, value) do { PyObject *old_ = (PyObject *)(slot); (slot) = (value); Py_XDECREF(old_); } while (0)

/* ------------------------------------------------------------------------------- Launcher */

typedef struct {
    char kind;
    Py_ssize_t offset, size;
} Slot;

typedef struct {
    PyObject_HEAD
    void *function;
    cu_launch_t launch;
    cu_launch_ex_t launch_ex;
    unsigned shared;
    Py_ssize_t n, param_bytes;
    Slot *slots;
    PyObject *slow;
    int programmatic;   /* slow.programmatic: every launch allows programmatic stream serialization */
} Launcher;

static PyObject *Launcher_type;

static void Launcher_dealloc(PyObject *op) {
    Launcher *self = (Launcher *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyMem_Free(self->slots);
    Py_XDECREF(self->slow);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static int as_address(PyObject *o, void **out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

static PyObject *Launcher_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *function, *launch, *launch_ex, *slots, *slow;
    Py_ssize_t param_bytes;
    unsigned int shared;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOnIO", &function, &launch, &launch_ex, &slots, &param_bytes, &shared,
                          &slow))
        return NULL;
    if (!PyTuple_Check(slots)) {
        PyErr_SetString(PyExc_TypeError, "slots must be a tuple of (kind, offset, size)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(slots);
    if (n > MAX_PARAMS || param_bytes < 0 || param_bytes > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "too many parameters or too large a parameter buffer");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    Launcher *self = (Launcher *)alloc(tp, 0);
    if (!self) return NULL;
    self->slots = NULL;
    self->slow = NULL;
    self->programmatic = 0;
    self->n = n;
    self->param_bytes = param_bytes;
    self->shared = shared;
    if (as_address(function, &self->function) || as_address(launch, (void **)&self->launch) ||
        as_address(launch_ex, (void **)&self->launch_ex))
        goto fail;
    self->slots = PyMem_Calloc(n ? n : 1, sizeof(Slot));
    if (!self->slots) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GetItem(slots, i);
        const char *kind;
        Py_ssize_t off, size;
        if (!t || !PyArg_ParseTuple(t, "snn", &kind, &off, &size)) goto fail;
        if (strlen(kind) != 1 || !strchr("bBhHiIqQfd?s", kind[0]) || off < 0 || size <= 0 ||
            off + size > param_bytes) {
            PyErr_Format(PyExc_ValueError, "bad parameter slot %zd", i);
            goto fail;
        }
        self->slots[i].kind = kind[0];
        self->slots[i].offset = off;
        self->slots[i].size = size;
    }
    Py_INCREF(slow);
    self->slow = slow;
    PyObject *programmatic = PyObject_GetAttrString(slow, "programmatic");
    if (!programmatic) goto fail;
    self->programmatic = PyObject_IsTrue(programmatic);
    Py_DECREF(programmatic);
    if (self->programmatic < 0) goto fail;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* Write one value as struct.pack_into would; 0 on success, -1 (error cleared) when it does not fit
 * or has the wrong type: the caller then asks the Python path for its exact error. */
static int pack_int(PyObject *v, long long lo, long long hi, void *dst, int size) {
    long long x;
    if (PyLong_Check(v)) {
        int overflow;
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
    } else {
        PyObject *i = PyNumber_Index(v);
        if (!i) { PyErr_Clear(); return -1; }
        int overflow;
        x = PyLong_AsLongLongAndOverflow(i, &overflow);
        Py_DECREF(i);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
    }
    if (x < lo || x > hi) return -1;
    switch (size) {
    case 1: { int8_t y = (int8_t)x; memcpy(dst, &y, 1); break; }
    case 2: { int16_t y = (int16_t)x; memcpy(dst, &y, 2); break; }
    case 4: { int32_t y = (int32_t)x; memcpy(dst, &y, 4); break; }
    default: memcpy(dst, &x, 8);
    }
    return 0;
}

static int pack_u64(PyObject *v, void *dst) {
    PyObject *i = PyLong_Check(v) ? (Py_INCREF(v), v) : PyNumber_Index(v);
    if (!i) { PyErr_Clear(); return -1; }
    unsigned long long x = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    memcpy(dst, &x, 8);
    return 0;
}

static int pack_one(const Slot *s, PyObject *v, char *buf) {
    char *dst = buf + s->offset;
    switch (s->kind) {
    case 'b': return pack_int(v, INT8_MIN, INT8_MAX, dst, 1);
    case 'B': return pack_int(v, 0, UINT8_MAX, dst, 1);
    case 'h': return pack_int(v, INT16_MIN, INT16_MAX, dst, 2);
    case 'H': return pack_int(v, 0, UINT16_MAX, dst, 2);
    case 'i': return pack_int(v, INT32_MIN, INT32_MAX, dst, 4);
    case 'I': return pack_int(v, 0, UINT32_MAX, dst, 4);
    case 'q': return pack_int(v, INT64_MIN, INT64_MAX, dst, 8);
    case 'Q': return pack_u64(v, dst);
    case 'f': {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        float f = (float)d;
        if (isinf(f) && !isinf(d)) return -1;   /* struct: "float too large to pack with f format" */
        memcpy(dst, &f, 4);
        return 0;
    }
    case 'd': {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        memcpy(dst, &d, 8);
        return 0;
    }
    case '?': {
        int t = PyObject_IsTrue(v);
        if (t < 0) { PyErr_Clear(); return -1; }
        *dst = (char)t;
        return 0;
    }
    case 's': {
        char *p;
        Py_ssize_t len;
        if (PyBytes_Check(v)) {
            if (PyBytes_AsStringAndSize(v, &p, &len) < 0) { PyErr_Clear(); return -1; }
        } else if (PyByteArray_Check(v)) {
            p = PyByteArray_AsString(v);
            len = PyByteArray_Size(v);
        } else {
            return -1;
        }
        if (len != s->size) return -1;
        memcpy(dst, p, len);
        return 0;
    }
    }
    return -1;
}

/* The Python path's error for values that did not pack: slow._native_pack_error(values, fields). */
static void raise_pack_error(Launcher *self, PyObject *const *values, Py_ssize_t nvalues,
                             const unsigned *dims, unsigned long long stream) {
    PyObject *vals = PyTuple_New(nvalues);
    if (!vals) return;
    for (Py_ssize_t i = 0; i < nvalues; i++) {
        Py_INCREF(values[i]);
        PyTuple_SetItem(vals, i, values[i]);
    }
    PyObject *exc = PyObject_CallMethod(self->slow, "_native_pack_error", "(N(IIIIIIIK))", vals, dims[0], dims[1],
                                        dims[2], dims[3], dims[4], dims[5], self->shared, stream);
    if (!exc) return;
    if (PyExceptionInstance_Check(exc))
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    else
        PyErr_SetString(PyExc_TypeError, "launch arguments could not be packed");
    Py_DECREF(exc);
}

/* Pack and launch. dims: grid x y z, block x y z; cluster NULL for a plain cuLaunchKernel. */
static int do_launch(Launcher *self, const unsigned *dims, const unsigned *cluster, unsigned long long stream,
                     PyObject *const *values, Py_ssize_t nvalues) {
    if (nvalues != self->n) {
        raise_pack_error(self, values, nvalues, dims, stream);
        return -1;
    }
    /* 64-byte aligned, zeroed (the padding bytes are those struct writes: zeros) */
    char stack_buf[STACK_PARAM_BYTES + 64];
    void *stack_ptrs[STACK_PARAMS];
    char *raw = stack_buf, *heap_buf = NULL;
    void **ptrs = stack_ptrs, **heap_ptrs = NULL;
    if (self->param_bytes > STACK_PARAM_BYTES) {
        raw = heap_buf = PyMem_Malloc(self->param_bytes + 64);
        if (!raw) { PyErr_NoMemory(); return -1; }
    }
    if (self->n > STACK_PARAMS) {
        ptrs = heap_ptrs = PyMem_Malloc(self->n * sizeof(void *));
        if (!ptrs) { PyMem_Free(heap_buf); PyErr_NoMemory(); return -1; }
    }
    char *buf = (char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    memset(buf, 0, self->param_bytes);
    int rc = -1;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        if (pack_one(&self->slots[i], values[i], buf) < 0) {
            raise_pack_error(self, values, nvalues, dims, stream);
            goto done;
        }
        ptrs[i] = buf + self->slots[i].offset;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int r;
        if (cluster == NULL && !self->programmatic) {
            Py_BEGIN_ALLOW_THREADS
            r = self->launch(self->function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], self->shared,
                             (void *)(uintptr_t)stream, ptrs, NULL);
            Py_END_ALLOW_THREADS
        } else {
            LaunchAttribute attrs[2];
            unsigned num_attrs = 0;
            memset(attrs, 0, sizeof attrs);
            if (cluster != NULL) {
                attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attrs[num_attrs].value.cluster.x = cluster[0];
                attrs[num_attrs].value.cluster.y = cluster[1];
                attrs[num_attrs].value.cluster.z = cluster[2];
                num_attrs++;
            }
            if (self->programmatic) {
                attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                attrs[num_attrs].value.programmatic = 1;
                num_attrs++;
            }
            LaunchConfig cfg;
            memset(&cfg, 0, sizeof cfg);   /* padding included: the bytes the ctypes path writes */
            memcpy(cfg.grid, dims, sizeof cfg.grid);
            memcpy(cfg.block, dims + 3, sizeof cfg.block);
            cfg.shared = self->shared;
            cfg.stream = (void *)(uintptr_t)stream;
            cfg.attrs = attrs;
            cfg.num_attrs = num_attrs;
            Py_BEGIN_ALLOW_THREADS
            r = self->launch_ex(&cfg, self->function, ptrs, NULL);
            Py_END_ALLOW_THREADS
        }
        if (r == 0) { rc = 0; break; }
        /* slow._native_failed(code, call, retried): True to retry once (it made the kernel's context
         * current), else it raises the CudaError */
        PyObject *retry = PyObject_CallMethod(self->slow, "_native_failed", "(isi)", r,
                                              cluster || self->programmatic ? "cuLaunchKernelEx" : "cuLaunchKernel",
                                              attempt);
        if (!retry) goto done;
        int again = PyObject_IsTrue(retry);
        Py_DECREF(retry);
        if (again <= 0 || attempt == 1) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "CUDA launch failed with error %d", r);
            goto done;
        }
    }
done:
    PyMem_Free(heap_buf);
    PyMem_Free(heap_ptrs);
    return rc;
}

static int parse_dim(PyObject *v, unsigned *out, const char *what) {
    unsigned long x = PyLong_AsUnsignedLong(v);
    if ((x == (unsigned long)-1 && PyErr_Occurred()) || x > UINT32_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "launch %s must be a non-negative integer that fits in 32 bits, got %R",
                     what, v);
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

static int parse_stream(PyObject *v, unsigned long long *out) {
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "launch stream must be a non-negative integer that fits in 64 bits, got %R",
                     v);
        return -1;
    }
    *out = x;
    return 0;
}

/* values: a tuple or list; fills *items with borrowed references (list: the caller holds it) */
static PyObject *as_sequence(PyObject *values) {
    if (PyTuple_Check(values) || PyList_Check(values)) {
        Py_INCREF(values);
        return values;
    }
    PyObject *t = PySequence_Tuple(values);
    if (!t) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "launch values must be a sequence");
    }
    return t;
}

static int borrow_items(PyObject *seq, PyObject **items, Py_ssize_t cap, Py_ssize_t *n) {
    Py_ssize_t len = PyTuple_Check(seq) ? PyTuple_Size(seq) : PyList_Size(seq);
    if (len > cap) {
        PyErr_Format(PyExc_TypeError, "kernel takes at most %zd parameters, got %zd values", cap, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        items[i] = PyTuple_Check(seq) ? PyTuple_GetItem(seq, i) : PyList_GetItem(seq, i);
    *n = len;
    return 0;
}

static PyObject *launch_from_python(Launcher *self, const unsigned *dims, const unsigned *cluster,
                                    unsigned long long stream, PyObject *values) {
    PyObject *seq = as_sequence(values);
    if (!seq) return NULL;
    PyObject *stack_items[STACK_PARAMS];
    PyObject **items = stack_items;
    Py_ssize_t len = PyTuple_Check(seq) ? PyTuple_Size(seq) : PyList_Size(seq);
    if (len > STACK_PARAMS) {
        items = PyMem_Malloc(len * sizeof(PyObject *));
        if (!items) { Py_DECREF(seq); return PyErr_NoMemory(); }
    }
    Py_ssize_t n;
    int rc = borrow_items(seq, items, len, &n);
    if (rc == 0) rc = do_launch(self, dims, cluster, stream, items, n);
    if (items != stack_items) PyMem_Free(items);
    Py_DECREF(seq);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* launch(gx, gy, gz, bx, by, bz, stream, values): the ctypes Launcher's signature */
static PyObject *Launcher_launch(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Launcher *self = (Launcher *)op;
    static const char *names[] = {"grid x", "grid y", "grid z", "block x", "block y", "block z"};
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "launch() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    unsigned dims[6];
    for (int i = 0; i < 6; i++)
        if (parse_dim(args[i], &dims[i], names[i]) < 0) return NULL;
    unsigned long long stream;
    if (parse_stream(args[6], &stream) < 0) return NULL;
    return launch_from_python(self, dims, NULL, stream, args[7]);
}

static int parse_dim3(PyObject *t, unsigned *out, const char *what) {
    PyObject *seq = PySequence_Tuple(t);
    if (!seq) return -1;
    int rc = 0;
    if (PyTuple_Size(seq) != 3) {
        PyErr_Format(PyExc_ValueError, "launch %s must have 3 dimensions, got %R", what, t);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = parse_dim(PyTuple_GetItem(seq, i), &out[i], what);
    Py_DECREF(seq);
    return rc;
}

/* launch_cluster(grid3, block3, cluster3, stream, values) through cuLaunchKernelEx */
static PyObject *Launcher_launch_cluster(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Launcher *self = (Launcher *)op;
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "launch_cluster() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    unsigned dims[6], cluster[3];
    if (parse_dim3(args[0], dims, "grid") < 0 || parse_dim3(args[1], dims + 3, "block") < 0) return NULL;
    if (parse_dim3(args[2], cluster, "cluster") < 0) return NULL;
    for (int i = 0; i < 3; i++)
        if (cluster[i] == 0) {
            PyErr_Format(PyExc_ValueError, "launch cluster dimensions must be positive integers, got %R", args[2]);
            return NULL;
        }
    unsigned long long stream;
    if (parse_stream(args[3], &stream) < 0) return NULL;
    return launch_from_python(self, dims, cluster, stream, args[4]);
}

/* pack(values) -> bytes: the parameter buffer a launch would hand the driver (for tests) */
static PyObject *Launcher_pack(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Launcher *self = (Launcher *)op;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "pack() takes the values");
        return NULL;
    }
    PyObject *seq = as_sequence(args[0]);
    if (!seq) return NULL;
    Py_ssize_t len = PyTuple_Check(seq) ? PyTuple_Size(seq) : PyList_Size(seq);
    PyObject *result = NULL;
    char *buf = PyMem_Calloc(self->param_bytes ? self->param_bytes : 1, 1);
    PyObject **items = PyMem_Malloc((len ? len : 1) * sizeof(PyObject *));
    unsigned dims[6] = {1, 1, 1, 1, 1, 1};
    Py_ssize_t n;
    if (!buf || !items) { PyErr_NoMemory(); goto done; }
    if (borrow_items(seq, items, len, &n) < 0) goto done;
    if (n != self->n) { raise_pack_error(self, items, n, dims, 0); goto done; }
    for (Py_ssize_t i = 0; i < n; i++)
        if (pack_one(&self->slots[i], items[i], buf) < 0) {
            raise_pack_error(self, items, n, dims, 0);
            goto done;
        }
    result = PyBytes_FromStringAndSize(buf, self->param_bytes);
done:
    PyMem_Free(buf);
    PyMem_Free(items);
    Py_DECREF(seq);
    return result;
}

static PyObject *Launcher_get_slow(PyObject *op, void *closure) {
    (void)closure;
    Launcher *self = (Launcher *)op;
    Py_INCREF(self->slow);
    return self->slow;
}

static PyObject *Launcher_get_function(PyObject *op, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)((Launcher *)op)->function);
}

static PyObject *Launcher_get_shared(PyObject *op, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(((Launcher *)op)->shared);
}

static PyMethodDef Launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))Launcher_launch, METH_FASTCALL,
     "launch(gx, gy, gz, bx, by, bz, stream, values) through cuLaunchKernel"},
    {"launch_cluster", (PyCFunction)(void (*)(void))Launcher_launch_cluster, METH_FASTCALL,
     "launch_cluster(grid3, block3, cluster3, stream, values) through cuLaunchKernelEx"},
    {"pack", (PyCFunction)(void (*)(void))Launcher_pack, METH_FASTCALL,
     "pack(values) -> bytes: the parameter buffer a launch writes"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Launcher_getset[] = {
    {"slow", Launcher_get_slow, NULL, "the ctypes Launcher of the same kernel (errors, diagnostics)", NULL},
    {"function", Launcher_get_function, NULL, "the CUfunction handle", NULL},
    {"shared_bytes", Launcher_get_shared, NULL, "dynamic shared memory of every launch", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Launcher_slots[] = {
    {Py_tp_new, Launcher_new},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_methods, Launcher_methods},
    {Py_tp_getset, Launcher_getset},
    {Py_tp_doc, "A kernel variant's native launcher (see tylo/runtime/native_launch.c)."},
    {0, NULL},
};

static PyType_Spec Launcher_spec = {"tylo.runtime._native_launch.Launcher", sizeof(Launcher), 0,
                                    Py_TPFLAGS_DEFAULT, Launcher_slots};

/* ----------------------------------------------------------------------------- Dispatcher */

/* How a parameter's argument becomes (key part, launch value); the Python classifiers in
 * tylo/jit.py are the reference, and each code computes exactly what its classifier returns. */
enum {
    P_UNSET = 0,  /* no type seen yet: slow path */
    P_PYTHON,     /* data = classify(v) -> (part, value or MISSING), called from C */
    P_INT,        /* unannotated int: ("i32", v == 1, v % 16 == 0), v; outside i32: slow path */
    P_FIXED,      /* data = the constant key part (("f32",), ("bool",)): value v */
    P_CONSTEXPR,  /* ("c", v), no value */
    P_ATTR_ARRAY, /* data = (ptr attribute, dtype attribute, {dtype: "*name"}, want or None, ptr is a method,
                     attribute that must be True or None): (name, ptr % 16 == 0), ptr */
    P_BLOB,       /* v.__tylo_param__() -> (kind, *static, data): ("blob", kind, static, len(data)), bytes(data);
                     data = True when the type declares __tylo_param_frozen__ (memoised per object) */
};

typedef struct {
    PyObject *type;   /* the exact type the code applies to (strong) */
    int code;
    PyObject *data;
    /* P_ATTR_ARRAY, unpacked from data (borrowed from it) */
    PyObject *ptr_name, *dtype_name, *dtype_map, *want, *check_name;
    int ptr_is_method;
    /* P_BLOB memo: the last object and what it gave */
    PyObject *memo_obj, *memo_part, *memo_value;
    Py_ssize_t index;
} Param;

typedef struct {
    PyObject_HEAD
    PyObject *slow_launch;   /* JITFunction._launch */
    PyObject *table;         /* key -> launcher (JITFunction._launchers) */
    PyObject *missing;       /* the _MISSING sentinel of the Python classifiers */
    PyObject *deps_check;    /* callable -> bool, or NULL */
    PyObject *stream_getter; /* callable -> int, (outer, inner): outer(inner()), or NULL (legacy default) */
    PyObject *last_key;      /* the key of the last fast launch and its launcher */
    PyObject *last_launcher;
    Py_ssize_t n;
    Param *params;
} Dispatcher;

static PyObject *Dispatcher_type;
static PyObject *str_i32, *str_c, *str_blob, *str_tylo_param, *part_i32[4];

static void param_clear(Param *p) {
    Py_CLEAR(p->type);
    Py_CLEAR(p->data);
    Py_CLEAR(p->memo_obj);
    Py_CLEAR(p->memo_part);
    Py_CLEAR(p->memo_value);
    p->code = P_UNSET;
}

static int Dispatcher_traverse(PyObject *op, visitproc visit, void *arg) {
    Dispatcher *self = (Dispatcher *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->slow_launch);
    Py_VISIT(self->table);
    Py_VISIT(self->missing);
    Py_VISIT(self->deps_check);
    Py_VISIT(self->stream_getter);
    Py_VISIT(self->last_key);
    Py_VISIT(self->last_launcher);
    for (Py_ssize_t i = 0; i < self->n; i++) {
        Py_VISIT(self->params[i].type);
        Py_VISIT(self->params[i].data);
        Py_VISIT(self->params[i].memo_obj);
        Py_VISIT(self->params[i].memo_part);
        Py_VISIT(self->params[i].memo_value);
    }
    return 0;
}

static int Dispatcher_clear(PyObject *op) {
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->slow_launch);
    Py_CLEAR(self->table);
    Py_CLEAR(self->missing);
    Py_CLEAR(self->deps_check);
    Py_CLEAR(self->stream_getter);
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_launcher);
    for (Py_ssize_t i = 0; i < self->n; i++) param_clear(&self->params[i]);
    return 0;
}

static void Dispatcher_dealloc(PyObject *op) {
    Dispatcher *self = (Dispatcher *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    Dispatcher_clear(op);
    PyMem_Free(self->params);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static PyObject *Dispatcher_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *slow_launch, *table, *missing;
    Py_ssize_t n;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!nO", &slow_launch, &PyDict_Type, &table, &n, &missing)) return NULL;
    if (n < 0 || n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "bad parameter count");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    Dispatcher *self = (Dispatcher *)alloc(tp, 0);
    if (!self) return NULL;
    self->params = PyMem_Calloc(n ? n : 1, sizeof(Param));
    if (!self->params) { Py_DECREF(self); return PyErr_NoMemory(); }
    self->n = n;
    Py_INCREF(slow_launch); self->slow_launch = slow_launch;
    Py_INCREF(table); self->table = table;
    Py_INCREF(missing); self->missing = missing;
    return (PyObject *)self;
}

static PyObject *Dispatcher_forget(PyObject *op, PyObject *unused) {
    (void)unused;
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_launcher);
    for (Py_ssize_t i = 0; i < self->n; i++) {
        Py_CLEAR(self->params[i].memo_obj);
        Py_CLEAR(self->params[i].memo_part);
        Py_CLEAR(self->params[i].memo_value);
    }
    Py_RETURN_NONE;
}

/* set_param(i, type, code, data): how arguments of exactly ``type`` at parameter i are classified */
static PyObject *Dispatcher_set_param(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    Dispatcher *self = (Dispatcher *)op;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "set_param(i, type, code, data)");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[0]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    long code = PyLong_AsLong(args[2]);
    if (code == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= self->n || code < P_UNSET || code > P_BLOB) {
        PyErr_SetString(PyExc_ValueError, "set_param: bad index or code");
        return NULL;
    }
    Param *p = &self->params[i];
    PyObject *data = args[3];
    Param fresh;
    memset(&fresh, 0, sizeof fresh);
    if (code == P_ATTR_ARRAY) {
        if (!PyTuple_Check(data) || PyTuple_Size(data) != 6) {
            PyErr_SetString(PyExc_TypeError, "array data: (ptr, dtype, map, want, ptr is a method, check)");
            return NULL;
        }
        fresh.ptr_name = PyTuple_GetItem(data, 0);
        fresh.dtype_name = PyTuple_GetItem(data, 1);
        fresh.dtype_map = PyTuple_GetItem(data, 2);
        fresh.want = PyTuple_GetItem(data, 3);
        fresh.ptr_is_method = PyObject_IsTrue(PyTuple_GetItem(data, 4));
        fresh.check_name = PyTuple_GetItem(data, 5);
        if (!PyUnicode_Check(fresh.ptr_name) || !PyUnicode_Check(fresh.dtype_name) || !PyDict_Check(fresh.dtype_map)) {
            PyErr_SetString(PyExc_TypeError, "array data: attribute names and a dict");
            return NULL;
        }
        if (fresh.want == Py_None) fresh.want = NULL;
        if (fresh.check_name == Py_None) fresh.check_name = NULL;
    }
    PyObject *keep[5] = {p->type, p->data, p->memo_obj, p->memo_part, p->memo_value};
    *p = fresh;   /* the new record first, the old references released after: no half-made state */
    p->index = i;
    p->code = (int)code;
    Py_INCREF(args[1]); p->type = args[1];
    Py_INCREF(data); p->data = data;
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_launcher);
    for (int k = 0; k < 5; k++) Py_XDECREF(keep[k]);
    Py_RETURN_NONE;
}

static int set_optional(PyObject **slot, PyObject *v) {
    PyObject *old = *slot;
    if (v == Py_None) {
        *slot = NULL;
    } else {
        Py_INCREF(v);
        *slot = v;
    }
    Py_XDECREF(old);
    return 0;
}

static PyObject *Dispatcher_set_deps(PyObject *op, PyObject *v) {
    set_optional(&((Dispatcher *)op)->deps_check, v);
    Py_RETURN_NONE;
}

static PyObject *Dispatcher_set_stream_getter(PyObject *op, PyObject *v) {
    if (PyTuple_Check(v) && (PyTuple_Size(v) != 2 || !PyCallable_Check(PyTuple_GetItem(v, 0)) ||
                             !PyCallable_Check(PyTuple_GetItem(v, 1)))) {
        PyErr_SetString(PyExc_TypeError, "a stream getter is a callable or (outer, inner) callables");
        return NULL;
    }
    set_optional(&((Dispatcher *)op)->stream_getter, v);
    Py_RETURN_NONE;
}

/* The key part parameter ``index`` had in the last fast launch (borrowed), or NULL. A part equal to
 * it is reused rather than made again, so a repeated launch compares its key by identity alone. */
static PyObject *last_part(Dispatcher *self, Py_ssize_t index) {
    PyObject *key = self->last_key;
    if (!key || PyTuple_Size(key) != self->n + 1) return NULL;
    return PyTuple_GetItem(key, index + 1);    /* after the block shape */
}

/* ``(a, b)`` as a key part: the last launch's part when it holds these very objects, else a new tuple */
static PyObject *pair_part(Dispatcher *self, Py_ssize_t index, PyObject *a, PyObject *b) {
    PyObject *last = last_part(self, index);
    if (last && PyTuple_CheckExact(last) && PyTuple_Size(last) == 2 && PyTuple_GetItem(last, 0) == a &&
        PyTuple_GetItem(last, 1) == b) {
        Py_INCREF(last);
        return last;
    }
    return PyTuple_Pack(2, a, b);
}

/* 1: part and value made (value may be NULL: none); 0: not handled here (slow path); -1: error.
 * ``p`` is a copy of the parameter's state whose ``data`` (which owns the borrowed fields) the
 * caller holds: Python code run here (getattr, a classifier) may call set_param meanwhile. */
static int classify(Dispatcher *self, Param *p, PyObject *v, PyObject **part, PyObject **value) {
    *part = *value = NULL;
    switch (p->code) {
    case P_INT: {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        if (x < INT32_MIN || x > INT32_MAX) return 0;
        long long r = x % 16;
        int idx = (x == 1) * 2 + (r == 0);
        *part = part_i32[idx];
        Py_INCREF(*part);
        Py_INCREF(v);
        *value = v;
        return 1;
    }
    case P_FIXED:
        Py_INCREF(p->data);
        *part = p->data;
        Py_INCREF(v);
        *value = v;
        return 1;
    case P_CONSTEXPR:
        *part = pair_part(self, p->index, str_c, v);
        return *part ? 1 : -1;
    case P_ATTR_ARRAY: {
        if (p->check_name) {
            PyObject *ok = PyObject_GetAttr(v, p->check_name);
            if (!ok) { PyErr_Clear(); return 0; }
            int good = ok == Py_True;
            Py_DECREF(ok);
            if (!good) return 0;
        }
        PyObject *ptr = p->ptr_is_method ? PyObject_CallMethodObjArgs(v, p->ptr_name, NULL)
                                         : PyObject_GetAttr(v, p->ptr_name);
        if (!ptr) { PyErr_Clear(); return 0; }
        PyObject *dt = PyObject_GetAttr(v, p->dtype_name);
        if (!dt) { Py_DECREF(ptr); PyErr_Clear(); return 0; }
        PyObject *name = PyDict_GetItemWithError(p->dtype_map, dt);  /* borrowed */
        Py_DECREF(dt);
        if (!name || !PyLong_Check(ptr)) { PyErr_Clear(); Py_DECREF(ptr); return 0; }
        if (p->want && PyUnicode_Compare(name, p->want) != 0) { PyErr_Clear(); Py_DECREF(ptr); return 0; }
        unsigned long long a = PyLong_AsUnsignedLongLong(ptr);
        if (a == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); Py_DECREF(ptr); return 0; }
        *part = pair_part(self, p->index, name, (a & 15) == 0 ? Py_True : Py_False);
        if (!*part) { Py_DECREF(ptr); return -1; }
        *value = ptr;
        return 1;
    }
    case P_BLOB: {
        int frozen = p->data == Py_True;
        p = &self->params[p->index];     /* the memo lives in the Dispatcher's own record */
        if (frozen && p->memo_obj == v) {
            Py_INCREF(p->memo_part); *part = p->memo_part;
            Py_INCREF(p->memo_value); *value = p->memo_value;
            return 1;
        }
        PyObject *t = PyObject_CallMethodObjArgs(v, str_tylo_param, NULL);
        if (!t) { PyErr_Clear(); return 0; }
        if (!PyTuple_Check(t) || PyTuple_Size(t) < 2) { Py_DECREF(t); return 0; }
        Py_ssize_t len = PyTuple_Size(t);
        PyObject *data = PyTuple_GetItem(t, len - 1);
        PyObject *bytes = PyBytes_Check(data) ? (Py_INCREF(data), data) : PyBytes_FromObject(data);
        if (!bytes) { PyErr_Clear(); Py_DECREF(t); return 0; }
        PyObject *stat = PyTuple_GetSlice(t, 1, len - 1);
        PyObject *size = PyLong_FromSsize_t(PyBytes_Size(bytes));
        PyObject *made = (stat && size) ? PyTuple_Pack(4, str_blob, PyTuple_GetItem(t, 0), stat, size) : NULL;
        Py_XDECREF(stat);
        Py_XDECREF(size);
        Py_DECREF(t);
        if (!made) { Py_DECREF(bytes); return -1; }
        /* the Python classifier raises for an unhashable static part: leave that to it */
        if (PyObject_Hash(made) == -1) { PyErr_Clear(); Py_DECREF(made); Py_DECREF(bytes); return 0; }
        if (frozen) {
            Py_INCREF(v); SETREF(p->memo_obj, v);
            Py_INCREF(made); SETREF(p->memo_part, made);
            Py_INCREF(bytes); SETREF(p->memo_value, bytes);
        }
        *part = made;
        *value = bytes;
        return 1;
    }
    case P_PYTHON: {
        PyObject *r = PyObject_CallFunctionObjArgs(p->data, v, NULL);
        if (!r) return -1;   /* the classifier's own error (a TypeError naming the argument) */
        if (!PyTuple_Check(r) || PyTuple_Size(r) != 2) { Py_DECREF(r); return 0; }
        PyObject *a = PyTuple_GetItem(r, 0), *b = PyTuple_GetItem(r, 1);
        Py_INCREF(a); *part = a;
        if (b != self->missing) { Py_INCREF(b); *value = b; }
        Py_DECREF(r);
        return 1;
    }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------- Bound */

typedef struct {
    PyObject_HEAD
    PyObject *dispatcher;
    PyObject *grid, *block, *kernel;   /* the 3-tuples as _Bound has them; the JITFunction */
    PyObject *cluster;                 /* the cluster 3-tuple, or None (a plain cuLaunchKernel) */
    unsigned dims[6], cluster_dims[3];
} Bound;

static PyObject *Bound_type;

static int Bound_traverse(PyObject *op, visitproc visit, void *arg) {
    Bound *self = (Bound *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->dispatcher);
    Py_VISIT(self->grid);
    Py_VISIT(self->block);
    Py_VISIT(self->kernel);
    Py_VISIT(self->cluster);
    return 0;
}

static int Bound_clear(PyObject *op) {
    Bound *self = (Bound *)op;
    Py_CLEAR(self->dispatcher);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->block);
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->cluster);
    return 0;
}

static void Bound_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    Bound_clear(op);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static PyObject *Bound_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *dispatcher, *grid, *block, *kernel, *cluster = Py_None;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Bound takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!O|O", (PyTypeObject *)Dispatcher_type, &dispatcher, &PyTuple_Type, &grid,
                          &PyTuple_Type, &block, &kernel, &cluster))
        return NULL;
    if (PyTuple_Size(grid) != 3 || PyTuple_Size(block) != 3 ||
        (cluster != Py_None && (!PyTuple_Check(cluster) || PyTuple_Size(cluster) != 3))) {
        PyErr_SetString(PyExc_ValueError, "grid, block and cluster (or None) must be 3-tuples");
        return NULL;
    }
    unsigned dims[6], cluster_dims[3] = {0, 0, 0};
    for (int i = 0; i < 6; i++)
        if (parse_dim(PyTuple_GetItem(i < 3 ? grid : block, i % 3), &dims[i], i < 3 ? "grid" : "block") < 0)
            return NULL;
    if (cluster != Py_None)
        for (int i = 0; i < 3; i++)
            if (parse_dim(PyTuple_GetItem(cluster, i), &cluster_dims[i], "cluster") < 0)
                return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    Bound *self = (Bound *)alloc(tp, 0);
    if (!self) return NULL;
    memcpy(self->dims, dims, sizeof dims);
    memcpy(self->cluster_dims, cluster_dims, sizeof cluster_dims);
    Py_INCREF(cluster); self->cluster = cluster;
    Py_INCREF(dispatcher); self->dispatcher = dispatcher;
    Py_INCREF(grid); self->grid = grid;
    Py_INCREF(block); self->block = block;
    Py_INCREF(kernel); self->kernel = kernel;
    return (PyObject *)self;
}

static PyObject *slow_path(Bound *b, PyObject *args, PyObject *stream, PyObject *kwargs) {
    Dispatcher *d = (Dispatcher *)b->dispatcher;
    PyObject *kw = kwargs ? kwargs : PyDict_New();
    if (!kw) return NULL;
    PyObject *r = PyObject_CallFunction(d->slow_launch, "OOOOOO", b->grid, b->block, b->cluster, stream, args, kw);
    if (!kwargs) Py_DECREF(kw);
    return r;
}

static PyObject *Bound_call(PyObject *op, PyObject *args, PyObject *kwargs) {
    Bound *b = (Bound *)op;
    Dispatcher *d = (Dispatcher *)b->dispatcher;
    PyObject *stream = Py_None;
    PyObject *rest = NULL;    /* keyword arguments other than stream= */
    if (kwargs && PyDict_Size(kwargs)) {
        PyObject *s = PyDict_GetItemString(kwargs, "stream");   /* borrowed */
        if (s == NULL || PyDict_Size(kwargs) > 1) {
            rest = PyDict_Copy(kwargs);
            if (!rest) return NULL;
            if (s && PyDict_DelItemString(rest, "stream") < 0) { Py_DECREF(rest); return NULL; }
        }
        if (s) stream = s;
    }
    Py_ssize_t n = d->n;
    if (rest || PyTuple_Size(args) != n) {
        PyObject *r = slow_path(b, args, stream, rest);
        Py_XDECREF(rest);
        return r;
    }
    if (d->deps_check) {
        PyObject *check = d->deps_check;   /* held: a compile on another thread may replace it */
        Py_INCREF(check);
        PyObject *ok = PyObject_CallNoArgs(check);
        Py_DECREF(check);
        if (!ok) return NULL;
        int current = ok == Py_True;
        Py_DECREF(ok);
        if (!current) return slow_path(b, args, stream, NULL);
    }
    PyObject *stack_parts[STACK_PARAMS + 1], *stack_values[STACK_PARAMS];
    PyObject **parts = stack_parts, **values = stack_values;
    if (n > STACK_PARAMS) {
        parts = PyMem_Malloc((n + 1) * sizeof(PyObject *));
        values = PyMem_Malloc(n * sizeof(PyObject *));
        if (!parts || !values) {
            PyMem_Free(parts == stack_parts ? NULL : parts);
            PyMem_Free(values == stack_values ? NULL : values);
            return PyErr_NoMemory();
        }
    }
    Py_ssize_t nparts = 0, nvalues = 0;
    PyObject *result = NULL, *key = NULL, *launcher = NULL;
    int fast = 1;
    parts[nparts++] = b->block;
    Py_INCREF(b->block);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GetItem(args, i);
        Param p = d->params[i];
        if (p.code == P_UNSET || (PyObject *)Py_TYPE(v) != p.type) { fast = 0; break; }
        PyObject *part, *value;
        Py_XINCREF(p.data);
        int r = classify(d, &p, v, &part, &value);
        Py_XDECREF(p.data);
        if (r < 0) goto done;
        if (r == 0) { fast = 0; break; }
        parts[nparts++] = part;
        if (value) values[nvalues++] = value;
    }
    if (!fast) {
        result = slow_path(b, args, stream, NULL);
        goto done;
    }
    /* the last key first: equal parts (identity first) need no hashing */
    PyObject *last_key = d->last_key, *last_launcher = d->last_launcher;
    if (last_key && last_launcher && PyTuple_Size(last_key) == nparts) {
        /* held: an __eq__ below may run Python code that replaces the remembered key */
        Py_INCREF(last_key);
        Py_INCREF(last_launcher);
        int same = 1;
        for (Py_ssize_t i = 0; same && i < nparts; i++) {
            PyObject *last = PyTuple_GetItem(last_key, i);
            if (last == parts[i]) continue;
            int eq = PyObject_RichCompareBool(parts[i], last, Py_EQ);
            if (eq < 0) { PyErr_Clear(); eq = 0; }
            same = eq;
        }
        Py_DECREF(last_key);
        if (same) launcher = last_launcher;   /* a strong reference, released at done */
        else Py_DECREF(last_launcher);
    }
    if (!launcher) {
        key = PyTuple_New(nparts);
        if (!key) goto done;
        for (Py_ssize_t i = 0; i < nparts; i++) {
            Py_INCREF(parts[i]);
            PyTuple_SetItem(key, i, parts[i]);
        }
        PyObject *found = PyDict_GetItemWithError(d->table, key);   /* borrowed */
        if (!found || (PyObject *)Py_TYPE(found) != Launcher_type) {
            /* a miss (or an unhashable part): the Python path compiles or explains */
            PyErr_Clear();
            result = slow_path(b, args, stream, NULL);
            goto done;
        }
        launcher = found;
        Py_INCREF(launcher);                   /* ours, released at done */
        Py_INCREF(launcher);
        SETREF(d->last_launcher, launcher);
        Py_INCREF(key);
        SETREF(d->last_key, key);
    }
    unsigned long long handle = 0;
    if (stream == Py_None) {
        if (d->stream_getter) {
            PyObject *h;
            PyObject *getter = d->stream_getter;   /* held while called */
            Py_INCREF(getter);
            if (PyTuple_Check(getter)) {   /* (outer, inner): outer(inner()) */
                PyObject *inner = PyObject_CallNoArgs(PyTuple_GetItem(getter, 1));
                h = inner ? PyObject_CallFunctionObjArgs(PyTuple_GetItem(getter, 0), inner, NULL) : NULL;
                Py_XDECREF(inner);
            } else {
                h = PyObject_CallNoArgs(getter);
            }
            Py_DECREF(getter);
            if (!h) goto done;
            handle = PyLong_AsUnsignedLongLong(h);
            Py_DECREF(h);
            if (handle == (unsigned long long)-1 && PyErr_Occurred()) goto done;
        }
    } else if (PyLong_CheckExact(stream)) {
        handle = PyLong_AsUnsignedLongLong(stream);
        if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            result = slow_path(b, args, stream, NULL);   /* a negative handle: its ValueError */
            goto done;
        }
    } else {
        result = slow_path(b, args, stream, NULL);       /* stream objects: the Python resolver */
        goto done;
    }
    int rc = do_launch((Launcher *)launcher, b->dims, b->cluster == Py_None ? NULL : b->cluster_dims, handle, values,
                       nvalues);
    if (rc == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    Py_XDECREF(launcher);
    for (Py_ssize_t i = 0; i < nparts; i++) Py_DECREF(parts[i]);
    for (Py_ssize_t i = 0; i < nvalues; i++) Py_DECREF(values[i]);
    Py_XDECREF(key);
    if (parts != stack_parts) PyMem_Free(parts);
    if (values != stack_values) PyMem_Free(values);
    return result;
}

static PyObject *Bound_get_grid(PyObject *op, void *c) { (void)c; PyObject *v = ((Bound *)op)->grid; Py_INCREF(v); return v; }
static PyObject *Bound_get_block(PyObject *op, void *c) { (void)c; PyObject *v = ((Bound *)op)->block; Py_INCREF(v); return v; }
static PyObject *Bound_get_kernel(PyObject *op, void *c) { (void)c; PyObject *v = ((Bound *)op)->kernel; Py_INCREF(v); return v; }
static PyObject *Bound_get_cluster(PyObject *op, void *c) { (void)c; PyObject *v = ((Bound *)op)->cluster; Py_INCREF(v); return v; }

static PyGetSetDef Bound_getset[] = {
    {"grid", Bound_get_grid, NULL, "the launch grid (x, y, z)", NULL},
    {"block", Bound_get_block, NULL, "the block shape (x, y, z)", NULL},
    {"kernel", Bound_get_kernel, NULL, "the JITFunction", NULL},
    {"cluster", Bound_get_cluster, NULL, "the cluster shape (x, y, z), or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Bound_slots[] = {
    {Py_tp_new, Bound_new},
    {Py_tp_call, Bound_call},
    {Py_tp_dealloc, Bound_dealloc},
    {Py_tp_traverse, Bound_traverse},
    {Py_tp_clear, Bound_clear},
    {Py_tp_getset, Bound_getset},
    {Py_tp_doc, "kernel[grid, block]: a launch bound to its geometry (native fast path)."},
    {0, NULL},
};

static PyType_Spec Bound_spec = {"tylo.runtime._native_launch.Bound", sizeof(Bound), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, Bound_slots};

static PyMethodDef Dispatcher_methods[] = {
    {"set_param", (PyCFunction)(void (*)(void))Dispatcher_set_param, METH_FASTCALL,
     "set_param(i, type, code, data): how arguments of exactly this type at parameter i are classified"},
    {"set_dependency_check", Dispatcher_set_deps, METH_O, "a callable -> bool (False: the slow path), or None"},
    {"set_stream_getter", Dispatcher_set_stream_getter, METH_O,
     "a callable -> the current stream handle for launches without stream=, (outer, inner) for "
     "outer(inner()), or None (handle 0)"},
    {"forget", Dispatcher_forget, METH_NOARGS, "drop the remembered last key and blob memos"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Dispatcher_slots[] = {
    {Py_tp_new, Dispatcher_new},
    {Py_tp_dealloc, Dispatcher_dealloc},
    {Py_tp_traverse, Dispatcher_traverse},
    {Py_tp_clear, Dispatcher_clear},
    {Py_tp_methods, Dispatcher_methods},
    {Py_tp_doc, "Per-kernel state of the native launch fast path."},
    {0, NULL},
};

static PyType_Spec Dispatcher_spec = {"tylo.runtime._native_launch.Dispatcher", sizeof(Dispatcher), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, Dispatcher_slots};

/* ---------------------------------------------------------------------------------- module */

static int add_type(PyObject *m, const char *name, PyType_Spec *spec, PyObject **out) {
    PyObject *t = PyType_FromSpec(spec);
    if (!t) return -1;
    *out = t;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native_launch",
    "tylo's native launch path (see tylo/runtime/native_launch.c and tylo/runtime/native.py)", -1, NULL,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native_launch(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    str_i32 = PyUnicode_InternFromString("i32");
    str_c = PyUnicode_InternFromString("c");
    str_blob = PyUnicode_InternFromString("blob");
    str_tylo_param = PyUnicode_InternFromString("__tylo_param__");
    if (!str_i32 || !str_c || !str_blob || !str_tylo_param) goto fail;
    for (int one = 0; one < 2; one++)
        for (int div = 0; div < 2; div++) {
            part_i32[one * 2 + div] = PyTuple_Pack(3, str_i32, one ? Py_True : Py_False, div ? Py_True : Py_False);
            if (!part_i32[one * 2 + div]) goto fail;
        }
    if (add_type(m, "Launcher", &Launcher_spec, &Launcher_type) < 0) goto fail;
    if (add_type(m, "Dispatcher", &Dispatcher_spec, &Dispatcher_type) < 0) goto fail;
    if (add_type(m, "Bound", &Bound_spec, &Bound_type) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "P_UNSET", P_UNSET) || PyModule_AddIntConstant(m, "P_PYTHON", P_PYTHON) ||
        PyModule_AddIntConstant(m, "P_INT", P_INT) || PyModule_AddIntConstant(m, "P_FIXED", P_FIXED) ||
        PyModule_AddIntConstant(m, "P_CONSTEXPR", P_CONSTEXPR) ||
        PyModule_AddIntConstant(m, "P_ATTR_ARRAY", P_ATTR_ARRAY) || PyModule_AddIntConstant(m, "P_BLOB", P_BLOB) ||
        PyModule_AddStringConstant(m, "SOURCE_DIGEST", TYLO_NATIVE_SOURCE_DIGEST))
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
