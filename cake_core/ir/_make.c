/* The constructor cake_core.ir.fastmake.maker gives a frozen attrs class, in C.
 *
 * Maker(cls, names) is a callable that takes one value per name, positionally, and returns a new
 * instance of cls with each value stored straight into the slot of that name (and, for any further
 * (name, value) pairs given as `fixed`, those values into their slots): what fastmake's Python maker
 * does by slot stores on a builder subclass and a __class__ switch, without the Python frame. It runs
 * no __init__, validator or hook: fastmake.maker decides which classes that is right for (_simple) and
 * checks what this builds against what the class builds before it uses it; this file only refuses
 * names that are not plain object slots of cls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    Py_ssize_t nargs;       /* values a call takes */
    Py_ssize_t nslots;      /* nargs, then the fixed values */
    Py_ssize_t *offsets;    /* where each value goes in an instance */
    PyObject *fixed;        /* tuple of the fixed values */
    vectorcallfunc vectorcall;
} Maker;

/* The offset of the object slot `name` of `cls`, or -1 with an exception set. */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *name) {
    PyObject *descr = _PyType_Lookup(cls, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%R is not a slot of %s", name, cls->tp_name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "%R is not a writable object slot of %s", name, cls->tp_name);
        return -1;
    }
    return m->offset;
}

static PyObject *maker_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Maker *self = (Maker *)callable;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != self->nargs || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "make_%s() takes %zd positional arguments (%zd given)", self->cls->tp_name,
                     self->nargs, n);
        return NULL;
    }
    PyObject *o = self->cls->tp_alloc(self->cls, 0);
    if (o == NULL) return NULL;
    char *base = (char *)o;
    for (Py_ssize_t i = 0; i < n; i++) {
        *(PyObject **)(base + self->offsets[i]) = Py_NewRef(args[i]);
    }
    for (Py_ssize_t i = n; i < self->nslots; i++) {
        *(PyObject **)(base + self->offsets[i]) = Py_NewRef(PyTuple_GET_ITEM(self->fixed, i - n));
    }
    return o;
}

static PyObject *maker_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *cls, *names, *fixed_names = NULL, *fixed = NULL;
    static char *kwlist[] = {"cls", "names", "fixed_names", "fixed", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!|O!O!:Maker", kwlist, &PyType_Type, &cls, &PyTuple_Type, &names,
                                     &PyTuple_Type, &fixed_names, &PyTuple_Type, &fixed)) {
        return NULL;
    }
    Py_ssize_t nargs = PyTuple_GET_SIZE(names);
    Py_ssize_t nfixed = fixed_names ? PyTuple_GET_SIZE(fixed_names) : 0;
    if ((fixed ? PyTuple_GET_SIZE(fixed) : 0) != nfixed) {
        PyErr_SetString(PyExc_ValueError, "fixed_names and fixed differ in length");
        return NULL;
    }
    Maker *self = (Maker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->fixed = fixed ? Py_NewRef(fixed) : PyTuple_New(0);
    self->nargs = nargs;
    self->nslots = nargs + nfixed;
    self->vectorcall = maker_vectorcall;
    self->offsets = PyMem_New(Py_ssize_t, self->nslots + 1);
    if (self->fixed == NULL || self->offsets == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *name = i < nargs ? PyTuple_GET_ITEM(names, i) : PyTuple_GET_ITEM(fixed_names, i - nargs);
        Py_ssize_t off = PyUnicode_Check(name) ? slot_offset(self->cls, name) : -1;
        if (off < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "slot names are str");
            Py_DECREF(self);
            return NULL;
        }
        self->offsets[i] = off;
    }
    return (PyObject *)self;
}

static int maker_traverse(Maker *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    Py_VISIT(self->fixed);
    return 0;
}

static int maker_clear(Maker *self) {
    Py_CLEAR(self->cls);
    Py_CLEAR(self->fixed);
    return 0;
}

static void maker_dealloc(Maker *self) {
    PyObject_GC_UnTrack(self);
    maker_clear(self);
    PyMem_Free(self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cake_core.ir._make.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Maker(cls, names, fixed_names=(), fixed=()): builds a cls from one value per name, by slot stores",
    .tp_new = maker_new,
    .tp_traverse = (traverseproc)maker_traverse,
    .tp_clear = (inquiry)maker_clear,
    .tp_dealloc = (destructor)maker_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Maker, vectorcall),
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cake_core.ir._make", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__make(void) {
    if (PyType_Ready(&MakerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Maker", (PyObject *)&MakerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
