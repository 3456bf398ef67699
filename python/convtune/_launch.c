/* _convtune_launch: a Plan's call in C.  Optional: the binding uses ctypes
 * where this module is not built.
 *
 * Why it exists: a small convolution called from Python is host-bound.
 * Through ctypes, checking the tensors and calling conv_plan_execute cost
 * about 5 us of interpreter time on top of the library's 1.5 us, and
 * allocating the output 3 us more; here the checks are attribute reads made
 * from C.  Triton launches its kernels through a small C module for the same
 * reason.
 *
 * It uses Python's stable ABI only (one build serves CPython 3.9 and later)
 * and links neither libpython nor torch: tensors are read through their
 * Python attributes, or through functions torch's C++ API serves from
 * another library (below), reached by address.  conv_plan_execute (or
 * a backward plan's conv_plan_backward_data / _filter) is reached through the
 * address ctypes resolved, so plans and this module always use the same
 * loaded copy of libconvtune.so.
 *
 * Where the operator's library (_convtune_torch_op.so) is built, the binding
 * hands each Launcher its torch access table (_torch_access.h): the same
 * checks then read the C++ tensor, and the output comes from at::empty:
 * a small call's host time dropped by a third in most runs (5.2-5.9 to
 * 3.5-4.5 us for a 64x64 pass on H100 machines, BENCHMARKS-backward.md).
 * Without it, the attributes.
 *
 * Threads: a Launcher executes with the GIL held.  The GIL is what keeps two
 * threads from executing one plan at once (include/convtune.h, "Threads"),
 * and no Python code runs between the closed check and the execute, so
 * Plan.close() cannot free the plan under a call.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "convtune.h"
#include "_torch_access.h"

typedef conv_status (*execute_fn)(conv_plan *plan, void *stream, const void *x, const void *w,
                                  const void *bias, void *y);
/* conv_plan_backward_data (dy, w -> dx) and conv_plan_backward_filter (x, dy -> dw). */
typedef conv_status (*pass_fn)(conv_plan *plan, void *stream, const void *a, const void *b, void *out);

/* Interned attribute names, made once at module import. */
static PyObject *name_dtype, *name_shape, *name_get_device, *name_is_contiguous, *name_data_ptr,
    *name_requires_grad;
static PyObject *no_arguments; /* () */

/* A shape as integers, for comparing with a tensor's facts. */
typedef struct {
  int dims;
  int64_t sizes[CONVTUNE_TENSOR_MAX_DIMS];
} shape_ints;

/* The four arguments, in call order. */
enum { ARG_X, ARG_W, ARG_BIAS, ARG_OUT, ARG_COUNT };

typedef struct {
  PyObject_HEAD
  execute_fn execute;
  /* A backward pass's plan: `backward` is called with the two inputs and the
   * output (the Launcher's x and w are those inputs; there is no bias), and
   * records no gradients itself, so their requires_grad is not read. */
  pass_fn backward;
  conv_plan *plan; /* NULL once closed */
  void *last_stream;
  int has_last_stream;
  int has_bias;
  long device_index;
  uint64_t x_bytes, w_bytes, bias_bytes, out_bytes;
  PyObject *x_shape, *w_shape, *bias_shape, *out_shape; /* tuples of ints */
  /* is_contiguous() keywords for x and out: None for NCHW plans,
   * {"memory_format": torch.channels_last} for NHWC ones; w_memory_format
   * the same for w (channels-last also for an NCHW plan whose filters are
   * K R S C). */
  PyObject *memory_format;
  PyObject *w_memory_format;
  PyObject *device_index_object;
  PyObject *tensor_type;     /* torch.Tensor */
  PyObject *float32;         /* torch.float32: the bias's type, whatever the plan's */
  PyObject *dtype;           /* the plan's torch dtype: x's, w's and the output's */
  int dtype_code;            /* its conv_dtype, as the torch access table reads it */
  int element_bytes;         /* its size */
  PyObject *empty;           /* () -> a new output tensor */
  PyObject *current_stream;  /* (device_index) -> int cudaStream_t */
  PyObject *is_grad_enabled; /* () -> bool */
  PyObject *order_streams;   /* (earlier, later): later waits for earlier's queued work */
  PyObject *fail;            /* (status): raises the library's error */
  /* NULL: the Python attributes and the callables above serve. */
  const convtune_torch_access *torch;
  shape_ints shapes[ARG_COUNT]; /* x, w, bias (dims 0 without) and out */
} Launcher;

/* Argument `arg`'s shape tuple (None: a plan without bias). */
static PyObject *shape_tuple(const Launcher *self, int arg)
{
  PyObject *shapes[ARG_COUNT] = {self->x_shape, self->w_shape, self->bias_shape, self->out_shape};
  return shapes[arg];
}

/* Argument `arg`'s is_contiguous() keywords (None: plain; the bias always is). */
static PyObject *arg_format(const Launcher *self, int arg)
{
  return arg == ARG_BIAS ? Py_None : arg == ARG_W ? self->w_memory_format : self->memory_format;
}

static int channels_last(const Launcher *self, int arg)
{
  return arg_format(self, arg) != Py_None;
}

/* ---------------------------------------------------------------- checks */

/* 1: yes, 0: no, -1: an exception is set. */
static int is_true(PyObject *value)
{
  if (value == NULL)
    return -1;
  int yes = value == Py_True;
  Py_DECREF(value);
  return yes;
}

static int attribute_is(PyObject *object, PyObject *name, PyObject *expected)
{
  PyObject *value = PyObject_GetAttr(object, name);
  if (value == NULL)
    return -1;
  int yes = value == expected;
  Py_DECREF(value);
  return yes;
}

/* An int result of a no-argument method, as an unsigned 64-bit value; -1 on error. */
static int call_unsigned(PyObject *object, PyObject *method, uint64_t *value)
{
  PyObject *result = PyObject_CallMethodObjArgs(object, method, NULL);
  if (result == NULL)
    return -1;
  *value = PyLong_AsUnsignedLongLong(result);
  Py_DECREF(result);
  return PyErr_Occurred() ? -1 : 0;
}

static int shape_bytes(PyObject *shape, int element_bytes, uint64_t *bytes)
{
  uint64_t count = (uint64_t)element_bytes;
  Py_ssize_t dims = PyTuple_Size(shape);
  if (dims < 0)
    return -1;
  for (Py_ssize_t i = 0; i < dims; i++) {
    long long dim = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
    if (dim < 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a shape has a negative dimension");
      return -1;
    }
    count *= (uint64_t)dim;
  }
  *bytes = count;
  return 0;
}

/* tensor.is_contiguous(**format), format None: no keywords. */
static int is_contiguous(PyObject *tensor, PyObject *format)
{
  if (format == Py_None)
    return is_true(PyObject_CallMethodObjArgs(tensor, name_is_contiguous, NULL));
  PyObject *method = PyObject_GetAttr(tensor, name_is_contiguous);
  if (method == NULL)
    return -1;
  PyObject *result = PyObject_Call(method, no_arguments, format);
  Py_DECREF(method);
  return is_true(result);
}

/* The element type argument `arg` must have: float32 for the bias, the
 * plan's for the rest. */
static PyObject *arg_dtype(const Launcher *self, int arg)
{
  return arg == ARG_BIAS ? self->float32 : self->dtype;
}

static int arg_dtype_code(const Launcher *self, int arg)
{
  return arg == ARG_BIAS ? CONV_DTYPE_F32 : self->dtype_code;
}

/* The tensor test of Plan._tensor_fits: a torch.Tensor of `dtype` and
 * `shape` on the plan's device, contiguous in `format`, its data aligned.
 * 1 and *data set when it fits, 0 when not (the binding then says why), -1
 * on an exception. */
static int tensor_fits(const Launcher *self, PyObject *tensor, PyObject *dtype, PyObject *shape,
                       PyObject *format, uintptr_t *data)
{
  int yes = PyObject_IsInstance(tensor, self->tensor_type);
  if (yes == 1)
    yes = attribute_is(tensor, name_dtype, dtype);
  if (yes == 1) {
    PyObject *actual = PyObject_GetAttr(tensor, name_shape);
    if (actual == NULL)
      return -1;
    yes = PyObject_RichCompareBool(actual, shape, Py_EQ);
    Py_DECREF(actual);
  }
  if (yes == 1) {
    PyObject *device = PyObject_CallMethodObjArgs(tensor, name_get_device, NULL);
    if (device == NULL)
      return -1;
    long index = PyLong_AsLong(device);
    Py_DECREF(device);
    if (index == -1 && PyErr_Occurred())
      return -1;
    yes = index == self->device_index;
  }
  if (yes == 1)
    yes = is_contiguous(tensor, format);
  if (yes == 1) {
    uint64_t pointer;
    if (call_unsigned(tensor, name_data_ptr, &pointer) < 0)
      return -1;
    yes = pointer % CONV_POINTER_ALIGNMENT == 0;
    *data = (uintptr_t)pointer;
  }
  return yes;
}

/* tensor_fits from the tensor's facts, read through the torch access table. */
static int tensor_fits_facts(const Launcher *self, PyObject *tensor, int arg, uintptr_t *data,
                             int *requires_grad)
{
  convtune_tensor_facts facts;
  int yes = self->torch->read(tensor, &facts);
  if (yes != 1)
    return yes;
  const shape_ints *shape = &self->shapes[arg];
  int dense = channels_last(self, arg) ? facts.channels_last : facts.contiguous;
  if (facts.dims != shape->dims || facts.dtype != arg_dtype_code(self, arg) ||
      facts.device != self->device_index || !dense ||
      facts.data % CONV_POINTER_ALIGNMENT != 0)
    return 0;
  for (int i = 0; i < shape->dims; i++)
    if (facts.sizes[i] != shape->sizes[i])
      return 0;
  *data = facts.data;
  *requires_grad = facts.requires_grad;
  return 1;
}

/* One argument's test, by the Launcher's way of reading tensors; where
 * `records` is not NULL, it becomes nonzero when the tensor requires grad. */
static int argument_fits(const Launcher *self, PyObject *tensor, int arg, uintptr_t *data, int *records)
{
  if (self->torch != NULL) {
    int requires_grad = 0;
    int yes = tensor_fits_facts(self, tensor, arg, data, &requires_grad);
    if (yes == 1 && records != NULL)
      *records |= requires_grad;
    return yes;
  }
  PyObject *format = arg_format(self, arg);
  int yes = tensor_fits(self, tensor, arg_dtype(self, arg), shape_tuple(self, arg), format, data);
  if (yes == 1 && records != NULL) {
    int requires_grad = attribute_is(tensor, name_requires_grad, Py_True);
    if (requires_grad < 0)
      return -1;
    *records |= requires_grad;
  }
  return yes;
}

static int grad_enabled(const Launcher *self)
{
  if (self->torch != NULL)
    return self->torch->grad_enabled();
  return is_true(PyObject_CallObject(self->is_grad_enabled, NULL));
}

static int overlaps(uintptr_t a, uint64_t a_bytes, uintptr_t b, uint64_t b_bytes)
{
  return a < b + b_bytes && b < a + a_bytes;
}

/* Plan._arguments_fit in C; pointers[] gets x, w, bias (0 without) and out
 * (0 when out is None).  A forward plan records no gradients (convtune does
 * no autograd), so with gradients on no input may require one; a backward
 * pass's inputs are not asked. */
static int arguments_fit(const Launcher *self, PyObject *x, PyObject *w, PyObject *bias, PyObject *out,
                         uintptr_t pointers[4])
{
  int records = 0, *watch = NULL;
  if (self->backward == NULL) {
    int enabled = grad_enabled(self);
    if (enabled < 0)
      return -1;
    watch = enabled ? &records : NULL;
  }
  int yes = argument_fits(self, x, ARG_X, &pointers[0], watch);
  if (yes == 1)
    yes = argument_fits(self, w, ARG_W, &pointers[1], watch);
  if (yes == 1)
    yes = (bias != Py_None) == self->has_bias;
  if (yes == 1 && bias != Py_None)
    yes = argument_fits(self, bias, ARG_BIAS, &pointers[2], watch);
  if (yes == 1 && out != Py_None) {
    yes = argument_fits(self, out, ARG_OUT, &pointers[3], NULL);
    if (yes == 1)
      yes = !overlaps(pointers[3], self->out_bytes, pointers[0], self->x_bytes) &&
            !overlaps(pointers[3], self->out_bytes, pointers[1], self->w_bytes) &&
            (bias == Py_None || !overlaps(pointers[3], self->out_bytes, pointers[2], self->bias_bytes));
  }
  return yes == 1 && records ? 0 : yes;
}

/* ---------------------------------------------------------------- call */

/* The plan's workspace may still be in use by a launch on another stream:
 * `stream` waits for it.  order_streams runs Python code, where another
 * thread may execute this plan, so the test repeats until nothing moved. */
static int order_after_last_stream(Launcher *self, void *stream)
{
  while (self->has_last_stream && self->last_stream != stream) {
    void *earlier = self->last_stream;
    PyObject *a = PyLong_FromVoidPtr(earlier), *b = PyLong_FromVoidPtr(stream);
    PyObject *result = a && b ? PyObject_CallFunctionObjArgs(self->order_streams, a, b, NULL) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (result == NULL)
      return -1;
    Py_DECREF(result);
    if (self->last_stream == earlier)
      break;
  }
  return 0;
}

static void *current_stream(const Launcher *self)
{
  if (self->torch != NULL)
    return self->torch->current_stream((int)self->device_index);
  PyObject *raw = PyObject_CallFunctionObjArgs(self->current_stream, self->device_index_object, NULL);
  if (raw == NULL)
    return NULL;
  void *stream = PyLong_AsVoidPtr(raw);
  Py_DECREF(raw);
  return stream;
}

/* A new tensor for the output, and its data pointer. */
static PyObject *new_output(const Launcher *self, uint64_t *pointer)
{
  if (self->torch == NULL) {
    PyObject *made = PyObject_CallObject(self->empty, NULL);
    if (made != NULL && call_unsigned(made, name_data_ptr, pointer) < 0)
      Py_CLEAR(made);
    return made;
  }
  const shape_ints *shape = &self->shapes[ARG_OUT];
  PyObject *made = self->torch->empty(shape->sizes, shape->dims, (int)self->device_index,
                                      channels_last(self, ARG_OUT), self->dtype_code);
  convtune_tensor_facts facts;
  int read = made != NULL ? self->torch->read(made, &facts) : -1;
  if (read == 0)
    PyErr_SetString(PyExc_RuntimeError, "convtune: at::empty returned something not a tensor");
  if (read != 1) {
    Py_XDECREF(made);
    return NULL;
  }
  *pointer = facts.data;
  return made;
}

/* A new reference to the output: `out`, or a new tensor. */
static PyObject *output_for(const Launcher *self, PyObject *out, uintptr_t *data)
{
  if (out != Py_None) {
    Py_INCREF(out);
    return out;
  }
  uint64_t pointer;
  PyObject *made = new_output(self, &pointer);
  if (made == NULL)
    return NULL;
  if (pointer % CONV_POINTER_ALIGNMENT != 0) {
    PyErr_SetString(PyExc_RuntimeError, "convtune: torch.empty returned an unaligned output");
    Py_DECREF(made);
    return NULL;
  }
  *data = (uintptr_t)pointer;
  return made;
}

/* launcher(x, w, bias, out) -> out (a new tensor when out is None) after
 * queueing the convolution on torch's current stream; None, having done
 * nothing, when an argument does not fit the plan (the binding then says
 * which and why).  A backward pass's launcher: launcher(dy, w, None, out)
 * or launcher(x, dy, None, out). */
static PyObject *launcher_call(PyObject *object, PyObject *args, PyObject *kwargs)
{
  Launcher *self = (Launcher *)object;
  PyObject *x, *w, *bias, *out;
  if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "a Launcher takes (x, w, bias, out) positionally");
    return NULL;
  }
  if (!PyArg_UnpackTuple(args, "Launcher", 4, 4, &x, &w, &bias, &out))
    return NULL;

  uintptr_t pointers[4] = {0, 0, 0, 0};
  int fit = arguments_fit(self, x, w, bias, out, pointers);
  if (fit <= 0) {
    if (fit < 0)
      return NULL;
    Py_INCREF(Py_None);
    return Py_None;
  }
  void *stream = current_stream(self);
  if (stream == NULL && PyErr_Occurred())
    return NULL;
  PyObject *result = output_for(self, out, &pointers[3]);
  if (result == NULL)
    return NULL;
  if (order_after_last_stream(self, stream) < 0)
    goto fail;
  /* From here to the execute no Python code runs. */
  if (self->plan == NULL) {
    PyErr_SetString(PyExc_ValueError, "this convtune Plan is closed");
    goto fail;
  }
  conv_status status =
      self->backward != NULL
          ? self->backward(self->plan, stream, (const void *)pointers[0], (const void *)pointers[1],
                           (void *)pointers[3])
          : self->execute(self->plan, stream, (const void *)pointers[0], (const void *)pointers[1],
                          (const void *)pointers[2], (void *)pointers[3]);
  if (status != CONV_OK) {
    PyObject *code = PyLong_FromLong((long)status);
    PyObject *raised = code ? PyObject_CallFunctionObjArgs(self->fail, code, NULL) : NULL;
    Py_XDECREF(code);
    if (raised != NULL) {
      Py_DECREF(raised);
      PyErr_Format(PyExc_RuntimeError, "convtune: the plan's execute failed with status %d", (int)status);
    }
    goto fail;
  }
  self->last_stream = stream;
  self->has_last_stream = 1;
  return result;

fail:
  Py_DECREF(result);
  return NULL;
}

/* ---------------------------------------------------------------- type */

/* The objects a Launcher holds references to: its constructor's objects,
 * in keyword order, then the device index as an int. */
#define LAUNCHER_OBJECT_SLOTS(self)                                                                \
  {&(self)->x_shape, &(self)->w_shape, &(self)->bias_shape, &(self)->out_shape,                    \
   &(self)->memory_format, &(self)->w_memory_format, &(self)->tensor_type, &(self)->float32, &(self)->empty, &(self)->current_stream,                \
   &(self)->is_grad_enabled, &(self)->order_streams, &(self)->fail, &(self)->dtype,                 \
   &(self)->device_index_object}

/* The shape as integers; 0 when it has too many dimensions to compare. */
static int shape_ints_of(PyObject *shape, shape_ints *ints)
{
  Py_ssize_t dims = PyTuple_Size(shape);
  if (dims > CONVTUNE_TENSOR_MAX_DIMS)
    return 0;
  ints->dims = (int)dims;
  for (Py_ssize_t i = 0; i < dims; i++)
    ints->sizes[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i)); /* checked by shape_bytes */
  return 1;
}

/* Reads tensors through `table` where it is of this build's version and
 * every shape fits its facts; otherwise the attributes serve. */
static void use_torch_access(Launcher *self, const convtune_torch_access *table)
{
  if (table == NULL || table->version != CONVTUNE_TORCH_ACCESS_VERSION)
    return;
  for (int arg = 0; arg < ARG_COUNT; arg++) {
    PyObject *shape = shape_tuple(self, arg);
    if (shape != Py_None && !shape_ints_of(shape, &self->shapes[arg]))
      return;
  }
  self->torch = table;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"execute_address", "plan_address", "device_index", "x_shape", "w_shape",
                             "bias_shape", "out_shape", "memory_format", "tensor_type",
                             "float32", "empty",
                             "current_stream", "is_grad_enabled", "order_streams", "fail", "backward",
                             "torch_access", "w_memory_format", "dtype", "dtype_code", NULL};
  unsigned long long execute_address, plan_address;
  long device_index;
  int backward = 0, dtype_code = CONV_DTYPE_F32;
  unsigned long long torch_access = 0;
  PyObject *x_shape, *w_shape, *bias_shape, *out_shape, *format, *tensor_type, *float32, *empty,
      *stream, *grad, *order, *fail, *w_format = NULL, *dtype = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKlO!O!OO!OOOOOOOO|pKOOi", keywords, &execute_address,
                                   &plan_address, &device_index, &PyTuple_Type, &x_shape, &PyTuple_Type,
                                   &w_shape, &bias_shape, &PyTuple_Type, &out_shape, &format,
                                   &tensor_type, &float32, &empty, &stream, &grad, &order, &fail,
                                   &backward, &torch_access, &w_format, &dtype, &dtype_code))
    return NULL;
  if (dtype == NULL)
    dtype = float32; /* a float32 plan */
  int element_bytes = dtype_code == CONV_DTYPE_F32                                   ? 4
                      : dtype_code == CONV_DTYPE_F16 || dtype_code == CONV_DTYPE_BF16 ? 2
                                                                                      : 0;
  if (element_bytes == 0) {
    PyErr_Format(PyExc_ValueError, "dtype_code %d is no conv_dtype", dtype_code);
    return NULL;
  }
  if (w_format == NULL)
    w_format = format; /* w in the activations' format */
  if (w_format != Py_None && !PyDict_Check(w_format)) {
    PyErr_SetString(PyExc_TypeError, "w_memory_format must be a dict or None");
    return NULL;
  }
  if (backward && bias_shape != Py_None) {
    PyErr_SetString(PyExc_ValueError, "a backward pass's Launcher takes no bias");
    return NULL;
  }
  if (format != Py_None && !PyDict_Check(format)) {
    PyErr_SetString(PyExc_TypeError, "memory_format must be a dict or None");
    return NULL;
  }
  if (execute_address == 0 || plan_address == 0) {
    PyErr_SetString(PyExc_ValueError, "a Launcher needs conv_plan_execute's address and a plan");
    return NULL;
  }
  if (bias_shape != Py_None && !PyTuple_Check(bias_shape)) {
    PyErr_SetString(PyExc_TypeError, "bias_shape must be a tuple or None");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  Launcher *self = (Launcher *)alloc(type, 0);
  if (self == NULL)
    return NULL;
  if (backward)
    self->backward = (pass_fn)(uintptr_t)execute_address;
  else
    self->execute = (execute_fn)(uintptr_t)execute_address;
  self->plan = (conv_plan *)(uintptr_t)plan_address;
  self->device_index = device_index;
  self->has_bias = bias_shape != Py_None;
  self->dtype_code = dtype_code;
  self->element_bytes = element_bytes;
  PyObject *index = PyLong_FromLong(device_index);
  PyObject **slots[] = LAUNCHER_OBJECT_SLOTS(self);
  PyObject *values[] = {x_shape, w_shape, bias_shape, out_shape, format, w_format, tensor_type,
                        float32, empty, stream, grad, order, fail, dtype, index};
  _Static_assert(sizeof values / sizeof values[0] == sizeof slots / sizeof slots[0],
                 "one value for each slot");
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    Py_XINCREF(values[i]);
    *slots[i] = values[i];
  }
  Py_XDECREF(index);
  if (index == NULL || shape_bytes(x_shape, element_bytes, &self->x_bytes) < 0 ||
      shape_bytes(w_shape, element_bytes, &self->w_bytes) < 0 ||
      shape_bytes(out_shape, element_bytes, &self->out_bytes) < 0 ||
      (self->has_bias && shape_bytes(bias_shape, (int)sizeof(float), &self->bias_bytes) < 0)) {
    Py_DECREF(self);
    return NULL;
  }
  use_torch_access(self, (const convtune_torch_access *)(uintptr_t)torch_access);
  return (PyObject *)self;
}

static void launcher_dealloc(PyObject *object)
{
  Launcher *self = (Launcher *)object;
  PyTypeObject *type = Py_TYPE(object);
  PyObject **slots[] = LAUNCHER_OBJECT_SLOTS(self);
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    Py_XDECREF(*slots[i]);
  freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_object(object);
  Py_DECREF(type);
}

/* close(): later calls raise; the caller then destroys the plan. */
static PyObject *launcher_close(PyObject *object, PyObject *unused)
{
  (void)unused;
  ((Launcher *)object)->plan = NULL;
  Py_INCREF(Py_None);
  return Py_None;
}

/* uses_torch(): whether tensors are read through the torch access table. */
static PyObject *launcher_uses_torch(PyObject *object, PyObject *unused)
{
  (void)unused;
  return PyBool_FromLong(((Launcher *)object)->torch != NULL);
}

static PyMethodDef launcher_methods[] = {
    {"close", launcher_close, METH_NOARGS, "Forget the plan: later calls raise ValueError."},
    {"uses_torch", launcher_uses_torch, METH_NOARGS,
     "Whether tensors are read through torch's C++ API (the torch_access table)."},
    {NULL, NULL, 0, NULL},
};

/* It keeps no reference to its Plan (the binding passes plain functions),
 * so it makes no reference cycle and needs no garbage-collector support. */
static PyType_Slot launcher_slots[] = {
    {Py_tp_new, (void *)launcher_new},
    {Py_tp_dealloc, (void *)launcher_dealloc},
    {Py_tp_call, (void *)launcher_call},
    {Py_tp_methods, launcher_methods},
    {Py_tp_doc, "Launcher(*, execute_address, plan_address, ...): one plan's call, see python/convtune"},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    "_convtune_launch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT, launcher_slots,
};

static struct PyModuleDef launch_module = {
    PyModuleDef_HEAD_INIT, "_convtune_launch", "A convtune Plan's call in C (python/convtune/_launch.c).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

static PyObject *intern(const char *text)
{
  return PyUnicode_InternFromString(text);
}

PyMODINIT_FUNC PyInit__convtune_launch(void)
{
  if (name_dtype == NULL) {
    name_dtype = intern("dtype");
    name_shape = intern("shape");
    name_get_device = intern("get_device");
    name_is_contiguous = intern("is_contiguous");
    name_data_ptr = intern("data_ptr");
    name_requires_grad = intern("requires_grad");
    no_arguments = PyTuple_New(0);
    if (!name_dtype || !name_shape || !name_get_device || !name_is_contiguous || !name_data_ptr ||
        !name_requires_grad || !no_arguments)
      return NULL;
  }
  PyObject *module = PyModule_Create(&launch_module);
  if (module == NULL)
    return NULL;
  PyObject *type = PyType_FromSpec(&launcher_spec);
  if (type == NULL || PyModule_AddObject(module, "Launcher", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
