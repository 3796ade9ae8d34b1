/* replaydb._speedups: the package's per-batch calls in C.
 *
 * The Python package calls libreplaydb.so through ctypes; each foreign call
 * there costs a few Python objects (c_void_p, byref, ...) and a batch's
 * arrays reached NumPy through __array_interface__ (a dict per array). This
 * module does the calls a learner makes per batch with none of that:
 *
 *   sample                     one C API call (to the host, or to the GPU
 *                              on a stream); the batch handle, or
 *                              (code, message address) for errors.check
 *   field                      a batch array as an instance of core.Array
 *                              (a subclass of ArrayBase), filled in C
 *   capsule                    a DLPack capsule over a batch array
 *   ArrayBase                  the buffer protocol (numpy.asarray,
 *                              memoryview) over a host array
 *
 * It links to nothing but Python: `bind` hands it the addresses of the C API
 * functions from the library ctypes loaded, so both use the same copy. It is
 * built for the stable ABI of Python 3.11 (one file, `_speedups.abi3.so`,
 * for every CPython >= 3.11); without it (an older Python, or
 * REPLAYDB_PURE_PYTHON=1) the package does the same through ctypes
 * (core.py, _PyArrayBase), with the same behaviour and messages. */

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "replaydb/c.h"

typedef int (*SampleFn)(replaydb_table_t*, int64_t, const replaydb_sample_options_t*,
                        replaydb_batch_t**, char**);
typedef int (*SampleToDeviceFn)(replaydb_table_t*, int64_t, const replaydb_sample_options_t*,
                                void*, replaydb_batch_t**, char**);
typedef int (*FieldFn)(const replaydb_batch_t*, const char*, replaydb_array_t*, char**);
typedef void (*BatchRefFn)(replaydb_batch_t*);
typedef int (*DlpackFn)(replaydb_batch_t*, const char*, void**, char**);

/* The C API, as bound by `bind` (all or none). */
static struct {
  SampleFn sample;
  SampleToDeviceFn sample_to_device;
  FieldFn field;
  BatchRefFn retain;
  BatchRefFn release;
  DlpackFn dlpack;
} api;

/* Handles belong to the process that made them (a forked child may neither
 * use nor free them): this is the current process, kept by an atfork hook. */
static pid_t current_pid;
static void AfterForkInChild(void) { current_pid = getpid(); }

/* DLPack's unversioned tensor (dlpack.h), the fields this module touches. */
typedef struct {
  void* data;
  int32_t device_type, device_id;
  int32_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensorView;
typedef struct {
  DLTensorView dl_tensor;
  void* manager_ctx;
  void (*deleter)(void*);
} DLManagedTensorView;

static PyObject* handle_name; /* "_handle" */
static PyObject* hold_name;   /* "_hold" */
static const char kDltensor[] = "dltensor";
static PyTypeObject* ArrayBaseType;

/* (code, address of the C API's malloc'ed message or 0): errors.check turns
 * it into the exception and frees the message. */
static PyObject* Failure(int code, char* err) {
  return Py_BuildValue("(iN)", code, PyLong_FromVoidPtr(err));
}

static int AsPointer(PyObject* o, void** out) {
  *out = o == Py_None ? NULL : PyLong_AsVoidPtr(o);
  return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static int CheckArgs(const char* fn, Py_ssize_t n, Py_ssize_t want) {
  if (api.sample == NULL) {
    PyErr_Format(PyExc_RuntimeError, "replaydb._speedups.%s: bind() was not called", fn);
    return -1;
  }
  if (n != want) {
    PyErr_Format(PyExc_TypeError, "replaydb._speedups.%s takes %zd arguments (%zd given)", fn,
                 want, n);
    return -1;
  }
  return 0;
}

/* bind(sample, sample_to_device, batch_field, batch_retain, batch_release,
 *      batch_dlpack): function addresses. */
static PyObject* Bind(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  (void)self;
  void* p[6];
  if (n != 6) {
    PyErr_SetString(PyExc_TypeError, "replaydb._speedups.bind takes 6 function addresses");
    return NULL;
  }
  for (int i = 0; i < 6; ++i) {
    if (AsPointer(args[i], &p[i]) < 0) return NULL;
    if (p[i] == NULL) {
      PyErr_Format(PyExc_ValueError, "replaydb._speedups.bind: address %d is 0", i);
      return NULL;
    }
  }
  api.sample = (SampleFn)p[0];
  api.sample_to_device = (SampleToDeviceFn)p[1];
  api.field = (FieldFn)p[2];
  api.retain = (BatchRefFn)p[3];
  api.release = (BatchRefFn)p[4];
  api.dlpack = (DlpackFn)p[5];
  Py_RETURN_NONE;
}

/* sample(table, batch_size, options[, stream]): the handle of a batch in
 * host memory, or with a stream (an int; 0 the legacy default one) of one
 * drawn into the table's GPU on it; or a failure. */
static PyObject* Sample(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  (void)self;
  if (CheckArgs("sample", n, n == 4 ? 4 : 3) < 0) return NULL;
  void *table, *options, *stream = NULL;
  if (AsPointer(args[0], &table) < 0 || AsPointer(args[2], &options) < 0 ||
      (n == 4 && AsPointer(args[3], &stream) < 0)) {
    return NULL;
  }
  const long long batch_size = PyLong_AsLongLong(args[1]);
  if (batch_size == -1 && PyErr_Occurred()) return NULL;
  replaydb_batch_t* batch = NULL;
  char* err = NULL;
  int code;
  PyThreadState* state = PyEval_SaveThread();  // it may wait for the rate limiter
  code = n == 4 ? api.sample_to_device((replaydb_table_t*)table, batch_size, options, stream,
                                       &batch, &err)
                : api.sample((replaydb_table_t*)table, batch_size, options, &batch, &err);
  PyEval_RestoreThread(state);
  if (code != 0) return Failure(code, err);
  return PyLong_FromVoidPtr(batch);
}

/* ---- ArrayBase: one array of a batch ---- */

typedef struct {
  PyObject_HEAD
  PyObject* batch; /* the core.Batch it reads through */
  PyObject* name;  /* str */
  replaydb_batch_t* own; /* a reference of its own (views outlive Batch.close()), or NULL */
  pid_t pid;             /* the process that made it */
  int ndim;
  int dtype;
  int device;
  int64_t nbytes;
  void* data;
  Py_ssize_t shape[REPLAYDB_MAX_DIMS];
  Py_ssize_t strides[REPLAYDB_MAX_DIMS];
} ArrayObject;

/* The buffer protocol's format and item size of a C API dtype; NULL for
 * those NumPy lacks (bfloat16). */
static const char* Format(int dtype, Py_ssize_t* itemsize) {
  switch (dtype) {
    case REPLAYDB_BOOL: *itemsize = 1; return "?";
    case REPLAYDB_U8: *itemsize = 1; return "B";
    case REPLAYDB_I8: *itemsize = 1; return "b";
    case REPLAYDB_I16: *itemsize = 2; return "h";
    case REPLAYDB_I32: *itemsize = 4; return "i";
    case REPLAYDB_I64: *itemsize = 8; return "q";
    case REPLAYDB_F16: *itemsize = 2; return "e";
    case REPLAYDB_F32: *itemsize = 4; return "f";
    case REPLAYDB_F64: *itemsize = 8; return "d";
    case REPLAYDB_U32: *itemsize = 4; return "I";
    case REPLAYDB_U64: *itemsize = 8; return "Q";
    default: return NULL;
  }
}

/* field(cls, batch, handle, name, name_bytes, squeeze): batch field `name`
 * as a `cls` (a subclass of ArrayBase), or a failure. `squeeze` drops axis 1
 * of a [B, 1, ...] shape. */
static PyObject* Field(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  (void)self;
  if (CheckArgs("field", n, 6) < 0) return NULL;
  PyObject* cls = args[0];
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject*)cls, ArrayBaseType)) {
    PyErr_SetString(PyExc_TypeError, "replaydb._speedups.field: cls is no ArrayBase");
    return NULL;
  }
  void* handle;
  if (AsPointer(args[2], &handle) < 0) return NULL;
  char* name;
  Py_ssize_t name_size;
  if (PyBytes_AsStringAndSize(args[4], &name, &name_size) < 0) return NULL;
  const int squeeze = PyObject_IsTrue(args[5]);
  if (squeeze < 0) return NULL;
  replaydb_array_t info;
  char* err = NULL;
  const int code = api.field((const replaydb_batch_t*)handle, name, &info, &err);
  if (code != 0) return Failure(code, err);
  if (squeeze && info.ndim >= 2 && info.dims[1] == 1) {
    memmove(&info.dims[1], &info.dims[2], sizeof(int64_t) * (size_t)(info.ndim - 2));
    --info.ndim;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)cls, Py_tp_alloc);
  ArrayObject* a = (ArrayObject*)alloc((PyTypeObject*)cls, 0);
  if (a == NULL) return NULL;
  Py_INCREF(args[1]);
  a->batch = args[1];
  Py_INCREF(args[3]);
  a->name = args[3];
  a->own = NULL;
  a->pid = current_pid;
  a->ndim = info.ndim;
  a->dtype = info.dtype;
  a->device = info.device;
  a->nbytes = (int64_t)info.nbytes;
  a->data = info.data;
  Py_ssize_t itemsize = 1;
  Format(info.dtype, &itemsize);
  Py_ssize_t stride = itemsize;
  for (int i = info.ndim - 1; i >= 0; --i) {
    a->shape[i] = (Py_ssize_t)info.dims[i];
    a->strides[i] = stride;
    stride *= (Py_ssize_t)info.dims[i];
  }
  return (PyObject*)a;
}

/* A capsule nobody consumed (a consumer renames it "used_dltensor" and calls
 * the deleter itself): its tensor's deleter, which gives the batch's
 * reference back, runs without the GIL (see ReleaseOwn). */
static void CapsuleDestructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kDltensor)) return;
  DLManagedTensorView* m = (DLManagedTensorView*)PyCapsule_GetPointer(capsule, kDltensor);
  if (m == NULL || m->deleter == NULL) return;
  PyThreadState* state = PyEval_SaveThread();
  m->deleter(m);
  PyEval_RestoreThread(state);
}

/* capsule(handle, name_bytes, squeeze): a "dltensor" capsule over field
 * `name` (the tensor holds its own reference to the batch), or a failure. */
static PyObject* Capsule(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  (void)self;
  if (CheckArgs("capsule", n, 3) < 0) return NULL;
  void* handle;
  if (AsPointer(args[0], &handle) < 0) return NULL;
  char* name;
  Py_ssize_t name_size;
  if (PyBytes_AsStringAndSize(args[1], &name, &name_size) < 0) return NULL;
  const int squeeze = PyObject_IsTrue(args[2]);
  if (squeeze < 0) return NULL;
  void* managed = NULL;
  char* err = NULL;
  const int code = api.dlpack((replaydb_batch_t*)handle, name, &managed, &err);
  if (code != 0) return Failure(code, err);
  DLManagedTensorView* m = (DLManagedTensorView*)managed;
  DLTensorView* t = &m->dl_tensor;
  if (squeeze && t->ndim >= 2 && t->shape[1] == 1) {
    memmove(&t->shape[1], &t->shape[2], sizeof(int64_t) * (size_t)(t->ndim - 2));
    --t->ndim;
  }
  PyObject* capsule = PyCapsule_New(managed, kDltensor, CapsuleDestructor);
  if (capsule == NULL) m->deleter(m);  // nobody else will
  return capsule;
}

/* Takes the array's own reference through its batch, as core.Array._hold
 * does; where that cannot be done here (a closed batch, another process's
 * array, a batch the collector cleared) _hold itself runs and raises, with
 * its message. */
static int Hold(ArrayObject* a) {
  if (a->own != NULL && a->pid == current_pid) return 0;
  if (a->own == NULL && a->pid == current_pid && a->batch != NULL) {
    PyObject* handle = PyObject_GetAttr(a->batch, handle_name);
    if (handle == NULL) return -1;
    void* h = handle == Py_None ? NULL : PyLong_AsVoidPtr(handle);
    Py_DECREF(handle);
    if (h == NULL && PyErr_Occurred()) return -1;
    if (h != NULL) {
      api.retain((replaydb_batch_t*)h);
      a->own = (replaydb_batch_t*)h;
      return 0;
    }
  }
  PyObject* r = PyObject_CallMethodObjArgs((PyObject*)a, hold_name, NULL);
  if (r == NULL) return -1;
  Py_DECREF(r);
  if (a->own != NULL && a->pid == current_pid) return 0;
  PyErr_SetString(PyExc_BufferError, "replaydb: the array's batch cannot be used here");
  return -1;
}

static int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  ArrayObject* a = (ArrayObject*)self;
  view->obj = NULL;
  if (a->device >= 0) {
    PyErr_Format(PyExc_BufferError,
                 "replaydb: array %R is in GPU memory; use torch.from_dlpack or "
                 "__cuda_array_interface__", a->name);
    return -1;
  }
  Py_ssize_t itemsize = 0;
  const char* format = Format(a->dtype, &itemsize);
  if (format == NULL) {
    PyErr_Format(PyExc_BufferError, "replaydb: array %R: NumPy has no such type; use "
                 "torch.from_dlpack", a->name);
    return -1;
  }
  if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && a->ndim > 1) {
    PyErr_Format(PyExc_BufferError, "replaydb: array %R is C-contiguous, not Fortran", a->name);
    return -1;
  }
  if (Hold(a) < 0) return -1;
  view->buf = a->data;
  Py_INCREF(self);
  view->obj = self;
  view->len = (Py_ssize_t)a->nbytes;
  view->readonly = 0;
  view->itemsize = itemsize;
  view->format = (flags & PyBUF_FORMAT) ? (char*)format : NULL;
  view->ndim = a->ndim;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? a->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? a->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

/* Gives the array's own reference back without the GIL: the last release of
 * a device sampler's batch takes the sampler's lock, which a thread waiting in
 * replaydb_sampler_next holds (and its interrupt check needs the GIL). */
static void ReleaseOwn(ArrayObject* a) {
  replaydb_batch_t* own = a->own;
  a->own = NULL;
  if (own != NULL && a->pid == current_pid) {  // a fork's copy is dropped
    PyThreadState* state = PyEval_SaveThread();
    api.release(own);
    PyEval_RestoreThread(state);
  }
}

/* A batch can hold its arrays (batch.keep = batch["x"]): the collector
 * must see the array's references to find such cycles. */
static int ArrayTraverse(PyObject* self, visitproc visit, void* arg) {
  ArrayObject* a = (ArrayObject*)self;
  Py_VISIT(a->batch);
  Py_VISIT(a->name);
  Py_VISIT((PyObject*)Py_TYPE(self));  // instances of heap types refer to them
  return 0;
}

static int ArrayClear(PyObject* self) {
  ArrayObject* a = (ArrayObject*)self;
  Py_CLEAR(a->batch);
  return 0;
}

static void ArrayDealloc(PyObject* self) {
  ArrayObject* a = (ArrayObject*)self;
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  ReleaseOwn(a);
  Py_CLEAR(a->batch);
  Py_CLEAR(a->name);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

static PyObject* ArrayNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)type;
  (void)args;
  (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "replaydb: arrays come from batches (batch[name]); they cannot be made");
  return NULL;
}

static PyObject* GetShape(PyObject* self, void* closure) {
  (void)closure;
  ArrayObject* a = (ArrayObject*)self;
  PyObject* t = PyTuple_New(a->ndim);
  if (t == NULL) return NULL;
  for (int i = 0; i < a->ndim; ++i) {
    PyObject* d = PyLong_FromSsize_t(a->shape[i]);
    if (d == NULL) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SetItem(t, i, d);
  }
  return t;
}

static PyObject* GetOwn(PyObject* self, void* closure) {
  (void)closure;
  ArrayObject* a = (ArrayObject*)self;
  if (a->own == NULL) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(a->own);
}

static PyObject* GetData(PyObject* self, void* closure) {
  (void)closure;
  return PyLong_FromVoidPtr(((ArrayObject*)self)->data);
}

/* _set_own(handle): takes a reference of the array's own (once). */
static PyObject* SetOwn(PyObject* self, PyObject* handle) {
  ArrayObject* a = (ArrayObject*)self;
  if (a->own == NULL) {
    void* h = PyLong_AsVoidPtr(handle);
    if (h == NULL) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "replaydb: a null batch handle");
      return NULL;
    }
    api.retain((replaydb_batch_t*)h);
    a->own = (replaydb_batch_t*)h;
    a->pid = current_pid;
  }
  Py_RETURN_NONE;
}

static PyMemberDef array_members[] = {
    {"_batch", T_OBJECT_EX, offsetof(ArrayObject, batch), READONLY, NULL},
    {"name", T_OBJECT_EX, offsetof(ArrayObject, name), READONLY, "the field's name"},
    {"_ndim", T_INT, offsetof(ArrayObject, ndim), READONLY, NULL},
    {"_dtype_code", T_INT, offsetof(ArrayObject, dtype), READONLY, NULL},
    {"_device", T_INT, offsetof(ArrayObject, device), READONLY, NULL},
    {"_nbytes", T_LONGLONG, offsetof(ArrayObject, nbytes), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"_shape", GetShape, NULL, NULL, NULL},
    {"_own", GetOwn, NULL, NULL, NULL},
    {"_data", GetData, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef array_methods[] = {
    {"_set_own", SetOwn, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot array_slots[] = {
    {Py_tp_dealloc, ArrayDealloc},
    {Py_tp_traverse, ArrayTraverse},
    {Py_tp_clear, ArrayClear},
    {Py_tp_new, ArrayNew},
    {Py_tp_members, array_members},
    {Py_tp_getset, array_getset},
    {Py_tp_methods, array_methods},
    {Py_bf_getbuffer, GetBuffer},
    {Py_tp_doc, "The C part of replaydb.Array: its description and the buffer protocol."},
    {0, NULL},
};

static PyType_Spec array_spec = {
    "replaydb._speedups.ArrayBase",
    sizeof(ArrayObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    array_slots,
};

static PyMethodDef module_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))Bind, METH_FASTCALL, NULL},
    {"sample", (PyCFunction)(void (*)(void))Sample, METH_FASTCALL, NULL},
    {"field", (PyCFunction)(void (*)(void))Field, METH_FASTCALL, NULL},
    {"capsule", (PyCFunction)(void (*)(void))Capsule, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "replaydb._speedups",
    "The per-batch calls of the replaydb package in C (see core.py).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
  current_pid = getpid();
  static int registered = 0;
  if (!registered) {
    if (pthread_atfork(NULL, NULL, AfterForkInChild) != 0) {
      PyErr_SetString(PyExc_ImportError, "replaydb._speedups: pthread_atfork failed");
      return NULL;
    }
    registered = 1;
  }
  handle_name = PyUnicode_InternFromString("_handle");
  hold_name = PyUnicode_InternFromString("_hold");
  if (handle_name == NULL || hold_name == NULL) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  ArrayBaseType = (PyTypeObject*)PyType_FromSpec(&array_spec);
  if (ArrayBaseType == NULL) {
    Py_DECREF(m);
    return NULL;
  }
  Py_INCREF((PyObject*)ArrayBaseType);
  if (PyModule_AddObject(m, "ArrayBase", (PyObject*)ArrayBaseType) < 0) {
    Py_DECREF((PyObject*)ArrayBaseType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
