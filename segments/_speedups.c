/*
 * segments._speedups: the per-record loops of the batch codec, in C.
 *
 * Why: encoding and decoding a batch is ~10 C-level passes over its records
 * when written in Python (transpose, type checks, timestamp deltas, Record
 * construction); here each is one pass.
 * docs/PERFORMANCE.md "The C fast path" has the figures.
 *
 * Contract with segments/batch.py, which stays the reference implementation:
 *   - every function here handles only the valid case. When anything is not
 *     exactly as expected (a wrong type, a value out of range, an unusual
 *     container) it returns None (or False), and the Python code runs the
 *     pure-Python path, which raises the documented error with its message.
 *     So error messages and edge cases live in one place, batch.py.
 *   - results are identical to the Python path (tests/segments/
 *     test_speedups.py compares the two with Hypothesis).
 *   - encode_body writes the msgpack body byte for byte as
 *     msgpack.Packer(use_bin_type=True) would; arrow_batch, decode_records and
 *     find_timestamp parse the subset of msgpack FORMAT.md 2.2 allows straight
 *     from the body bytes (one bounded Cursor reader), checking every length
 *     against the body before use (fuzzed under ASan/UBSan); range_ok and
 *     build_records only read the Python objects msgpack.unpackb returns.
 *
 * The module is optional: without a C compiler seglog installs and runs on
 * the Python path (slower, same results).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/uio.h>
#endif
#include <limits.h>

#include "_kafka_records.h" /* the reader's walk of a Kafka batch's records: batches_records takes plain ones */

/* Exact bytes or None: what a key or a value may be. */
static inline int
is_bin(PyObject *o)
{
    return o == Py_None || PyBytes_CheckExact(o);
}

/* A record's headers: an exact tuple of exact (str, bytes) tuples. */
static int
headers_ok(PyObject *h)
{
    if (!PyTuple_CheckExact(h))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(h);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(h, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1)))
            return 0;
    }
    return 1;
}

/* a + b into *out, or 0 when it leaves int64 (the Python path has no such limit). */
static inline int
add_int64(long long a, long long b, long long *out)
{
    if ((b > 0 && a > PY_LLONG_MAX - b) || (b < 0 && a < PY_LLONG_MIN - b))
        return 0;
    *out = a + b;
    return 1;
}

/* An exact int that fits an int64 into *out; 0 (no exception set) for anything else. */
static inline int
int64_of(PyObject *o, long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* An exact int in [0, 2**63-1] into *out; 0 when it is not one. */
static int
timestamp_of(PyObject *o, long long *out)
{
    return int64_of(o, out) && *out >= 0;
}

/* ---- msgpack encoding, byte for byte what msgpack.Packer(use_bin_type=True) writes ---- */

static inline Py_ssize_t
int_size(long long d)
{
    if (d >= 0)
        return d < 128 ? 1 : d < 256 ? 2 : d < 65536 ? 3 : d < (1LL << 32) ? 5 : 9;
    return d >= -32 ? 1 : d >= -128 ? 2 : d >= -32768 ? 3 : d >= -(1LL << 31) ? 5 : 9;
}

static inline Py_ssize_t
array_header_size(Py_ssize_t n)
{
    return n < 16 ? 1 : n < 65536 ? 3 : 5;
}

static inline Py_ssize_t
bin_header_size(Py_ssize_t n)
{
    return n < 256 ? 2 : n < 65536 ? 3 : 5;
}

static inline Py_ssize_t
str_header_size(Py_ssize_t n)
{
    return n < 32 ? 1 : n < 256 ? 2 : n < 65536 ? 3 : 5;
}

static inline unsigned char *
put_be(unsigned char *p, unsigned long long v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
    return p + bytes;
}

static inline unsigned char *
put_int(unsigned char *p, long long d)
{
    if (d >= 0) {
        if (d < 128) {
            *p++ = (unsigned char)d;
            return p;
        }
        if (d < 256) {
            *p++ = 0xcc;
            return put_be(p, (unsigned long long)d, 1);
        }
        if (d < 65536) {
            *p++ = 0xcd;
            return put_be(p, (unsigned long long)d, 2);
        }
        if (d < (1LL << 32)) {
            *p++ = 0xce;
            return put_be(p, (unsigned long long)d, 4);
        }
        *p++ = 0xcf;
        return put_be(p, (unsigned long long)d, 8);
    }
    if (d >= -32) {
        *p++ = (unsigned char)(d & 0xFF);
        return p;
    }
    if (d >= -128) {
        *p++ = 0xd0;
        return put_be(p, (unsigned long long)d, 1);
    }
    if (d >= -32768) {
        *p++ = 0xd1;
        return put_be(p, (unsigned long long)d, 2);
    }
    if (d >= -(1LL << 31)) {
        *p++ = 0xd2;
        return put_be(p, (unsigned long long)d, 4);
    }
    *p++ = 0xd3;
    return put_be(p, (unsigned long long)d, 8);
}

static inline unsigned char *
put_array_header(unsigned char *p, Py_ssize_t n)
{
    if (n < 16) {
        *p++ = (unsigned char)(0x90 | n);
        return p;
    }
    if (n < 65536) {
        *p++ = 0xdc;
        return put_be(p, (unsigned long long)n, 2);
    }
    *p++ = 0xdd;
    return put_be(p, (unsigned long long)n, 4);
}

/* A bin or str length in its 8-, 16- or 32-bit form: `first8` (0xc4 bin, 0xd9 str), +1, +2. */
static inline unsigned char *
put_length(unsigned char *p, Py_ssize_t n, unsigned char first8)
{
    if (n < 256) {
        *p++ = first8;
        return put_be(p, (unsigned long long)n, 1);
    }
    if (n < 65536) {
        *p++ = (unsigned char)(first8 + 1);
        return put_be(p, (unsigned long long)n, 2);
    }
    *p++ = (unsigned char)(first8 + 2);
    return put_be(p, (unsigned long long)n, 4);
}

static inline unsigned char *
put_bin(unsigned char *p, const char *data, Py_ssize_t n)
{
    p = put_length(p, n, 0xc4);
    memcpy(p, data, (size_t)n);
    return p + n;
}

static inline unsigned char *
put_str(unsigned char *p, const char *data, Py_ssize_t n)
{
    if (n < 32)
        *p++ = (unsigned char)(0xa0 | n); /* fixstr */
    else
        p = put_length(p, n, 0xd9);
    memcpy(p, data, (size_t)n);
    return p + n;
}

static inline unsigned char *
put_bin_or_nil(unsigned char *p, PyObject *o)
{
    if (o == Py_None) {
        *p++ = 0xc0;
        return p;
    }
    return put_bin(p, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
}

#define ITEM_LIMIT ((Py_ssize_t)0xFFFFFFFF) /* msgpack's largest bin, str or array */

/*
 * *total += n (n >= 0), or 0 when the sum passes PY_SSIZE_T_MAX. Each item is at most
 * ~2**32 bytes, but one bytes object may be referenced 2**31 times (by a shared record or
 * header pair), so the body's size can pass 2**63: unchecked, it wraps to a small positive
 * size and the write pass runs past the end of the buffer.
 */
static inline int
add_size(Py_ssize_t *total, Py_ssize_t n)
{
    if (n > PY_SSIZE_T_MAX - *total)
        return 0;
    *total += n;
    return 1;
}

/* Bytes a key or value takes in the body (it passed is_bin), or -1 above msgpack's limit. */
static inline Py_ssize_t
bin_or_nil_size(PyObject *o)
{
    if (o == Py_None)
        return 1;
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    return n > ITEM_LIMIT ? -1 : bin_header_size(n) + n;
}

/*
 * Bytes one record's headers take (they passed headers_ok), or -1 (a key not UTF-8 encodable or
 * holding NUL, too long, too many): the Python path then raises the error (records.text_problem).
 */
static Py_ssize_t
headers_size(PyObject *h)
{
    Py_ssize_t n = PyTuple_GET_SIZE(h), size = array_header_size(n);
    if (n > ITEM_LIMIT)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(h, i);
        Py_ssize_t key_len;
        const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &key_len);
        if (key == NULL) {
            PyErr_Clear(); /* e.g. a lone surrogate */
            return -1;
        }
        if (memchr(key, 0, (size_t)key_len) != NULL)
            return -1;
        Py_ssize_t value_len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1));
        if (key_len > ITEM_LIMIT || value_len > ITEM_LIMIT)
            return -1;
        if (!add_size(&size, 1 + str_header_size(key_len) + key_len + bin_header_size(value_len) + value_len))
            return -1;
    }
    return size;
}

static unsigned char *
put_headers(unsigned char *p, PyObject *h)
{
    Py_ssize_t n = PyTuple_GET_SIZE(h);
    p = put_array_header(p, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(h, i);
        Py_ssize_t key_len;
        const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &key_len); /* cached by headers_size */
        PyObject *value = PyTuple_GET_ITEM(pair, 1);
        *p++ = 0x92;
        p = put_str(p, key, key_len);
        p = put_bin(p, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
    }
    return p;
}

/* What the first pass of encode_body learns about valid records. */
typedef struct {
    PyObject **items;
    Py_ssize_t count, size;
    long long now_ms, base_ts, max_ts;
    int any_headers, with_deltas;
} BodyPlan;

/*
 * The checking and sizing pass of encode_body: 1 and `plan` filled in when the
 * records are the valid case, 0 when the Python path must decide (no exception
 * set either way). `records` must stay alive and unchanged while `plan` is used.
 */
static int
plan_body(PyObject *records, int log_append, long long now_ms, BodyPlan *plan)
{
    if (!PyList_CheckExact(records) && !PyTuple_CheckExact(records))
        return 0;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(records);
    if (count == 0 || count > ITEM_LIMIT || now_ms < 0)
        return 0;
    PyObject **items = PySequence_Fast_ITEMS(records);

    int any_headers = 0, any_ts = 0;
    long long base_ts = 0, min_ts = 0, max_ts = 0;
    Py_ssize_t kv_size = 0, headers_bytes = 0, deltas_size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *r = items[i];
        /* A tuple subclass (Record) is read as its storage; the Python path iterates it
           (zip(*records), unpacking), which only agrees when __iter__ is tuple's own. */
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 5 || Py_TYPE(r)->tp_iter != PyTuple_Type.tp_iter)
            return 0;
        PyObject *v = PyTuple_GET_ITEM(r, 0), *k = PyTuple_GET_ITEM(r, 1);
        if (!is_bin(v) || !is_bin(k))
            return 0;
        Py_ssize_t vs = bin_or_nil_size(v), ks = bin_or_nil_size(k);
        if (vs < 0 || ks < 0)
            return 0;
        if (!add_size(&kv_size, vs + ks))
            return 0;
        PyObject *h = PyTuple_GET_ITEM(r, 3);
        if (PyTuple_CheckExact(h) && PyTuple_GET_SIZE(h) == 0) {
            headers_bytes += 1;
        }
        else {
            if (!headers_ok(h))
                return 0;
            Py_ssize_t hs = headers_size(h);
            if (hs < 0)
                return 0;
            if (!add_size(&headers_bytes, hs))
                return 0;
            any_headers = 1;
        }
        if (log_append)
            continue;
        PyObject *t = PyTuple_GET_ITEM(r, 2);
        long long ts;
        if (t == Py_None)
            ts = now_ms;
        else if (!timestamp_of(t, &ts))
            return 0;
        else
            any_ts = 1;
        if (i == 0) {
            base_ts = min_ts = max_ts = ts;
        }
        else {
            if (ts < min_ts)
                min_ts = ts;
            if (ts > max_ts)
                max_ts = ts;
        }
        deltas_size += int_size(ts - base_ts);
    }
    if (log_append || !any_ts)
        base_ts = min_ts = max_ts = now_ms;
    int with_deltas = min_ts != max_ts;

    /* deltas_size <= 9 * count <= 9 * ITEM_LIMIT: the first terms cannot overflow. */
    Py_ssize_t column = array_header_size(count);
    Py_ssize_t size = 1 + 1 + (with_deltas ? column + deltas_size : 1) + 2 * column + (any_headers ? column : 1);
    if (!add_size(&size, kv_size) || !add_size(&size, any_headers ? headers_bytes : 0))
        return 0; /* the Python path decides (msgpack runs out of memory) */
    plan->items = items;
    plan->count = count;
    plan->size = size;
    plan->now_ms = now_ms;
    plan->base_ts = base_ts;
    plan->max_ts = max_ts;
    plan->any_headers = any_headers;
    plan->with_deltas = with_deltas;
    return 1;
}

/* The writing pass of encode_body into p (plan->size bytes): where the body ends. */
static unsigned char *
write_body_into(const BodyPlan *plan, unsigned char *p)
{
    PyObject **items = plan->items;
    Py_ssize_t count = plan->count;
    *p++ = 0x95; /* the five columns */
    *p++ = 0xc0; /* offset deltas: nil, dense */
    if (plan->with_deltas) {
        p = put_array_header(p, count);
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *t = PyTuple_GET_ITEM(items[i], 2);
            long long ts = t == Py_None ? plan->now_ms : PyLong_AsLongLong(t); /* checked by plan_body */
            p = put_int(p, ts - plan->base_ts);
        }
    }
    else {
        *p++ = 0xc0;
    }
    p = put_array_header(p, count);
    for (Py_ssize_t i = 0; i < count; i++)
        p = put_bin_or_nil(p, PyTuple_GET_ITEM(items[i], 1));
    p = put_array_header(p, count);
    for (Py_ssize_t i = 0; i < count; i++)
        p = put_bin_or_nil(p, PyTuple_GET_ITEM(items[i], 0));
    if (plan->any_headers) {
        p = put_array_header(p, count);
        for (Py_ssize_t i = 0; i < count; i++)
            p = put_headers(p, PyTuple_GET_ITEM(items[i], 3));
    }
    else {
        *p++ = 0xc0;
    }
    return p;
}

/* The writing pass of encode_body: the body `plan` describes, as a new bytes object. */
static PyObject *
write_body(const BodyPlan *plan)
{
    Py_ssize_t size = plan->size;
    PyObject *body = PyBytes_FromStringAndSize(NULL, size);
    if (body == NULL)
        return NULL;
    unsigned char *p = write_body_into(plan, (unsigned char *)PyBytes_AS_STRING(body));
    if (p != (unsigned char *)PyBytes_AS_STRING(body) + size) { /* cannot happen: the sizes are exact */
        Py_DECREF(body);
        PyErr_SetString(PyExc_SystemError, "seglog.segments._speedups.encode_body: size mismatch");
        return NULL;
    }
    return body;
}

/*
 * encode_body(records, log_append_time, now_ms) -> (body, base_ts, max_ts) | None
 *
 * The msgpack body batch.encode_batch_parts packs from batch._columns_of
 * ([nil, deltas | nil, keys, values, headers | nil], FORMAT.md 2.2), byte for
 * byte, without building the columns: one pass checks and sizes (plan_body),
 * one writes into the bytes object returned (write_body). None when
 * columns_of would return None, or a length is above msgpack's limits, or a
 * header key is not UTF-8 encodable.
 */
static PyObject *
encode_body(PyObject *self, PyObject *args)
{
    PyObject *records;
    int log_append;
    long long now_ms;
    if (!PyArg_ParseTuple(args, "OpL", &records, &log_append, &now_ms))
        return NULL;
    BodyPlan plan;
    if (!plan_body(records, log_append, now_ms, &plan))
        Py_RETURN_NONE;
    PyObject *body = write_body(&plan);
    if (body == NULL)
        return NULL;
    return Py_BuildValue("(NLL)", body, plan.base_ts, plan.max_ts);
}

/*
 * body_plan(records, log_append_time, now_ms) -> Plan | None
 *
 * encode_body in two steps: this runs its checking and sizing pass (which
 * reads the records but not the bytes of their keys and values) and returns
 * a Plan whose size, base_ts and max_ts are what encode_body would give;
 * Plan.write() then writes the body, in whichever thread calls it. The engine
 * plans a large batch on the event loop and writes its body in the thread
 * that writes it to the file (PERFORMANCE.md "Bodies are written where they
 * are encoded"). `records` must be an exact tuple: the Plan keeps it, and
 * everything plan_body accepted in it is immutable (exact tuples, bytes, str
 * and int), so the sizes stay exact. None when encode_body would return None.
 */
typedef struct {
    PyObject_HEAD
    PyObject *records; /* the exact tuple planned; NULL once written */
    BodyPlan plan;
} PlanObject;

/* GC support: a record's offset field is not checked, so a plan can sit in a reference cycle. */
static int
Plan_traverse(PlanObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->records);
    return 0;
}

static int
Plan_clear(PlanObject *self)
{
    Py_CLEAR(self->records);
    return 0;
}

static void
Plan_dealloc(PlanObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->records);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Plan_write(PlanObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *records = self->records;
    if (records == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this plan's body was written already");
        return NULL;
    }
    Py_INCREF(records); /* plan.items points into it: alive through the write, whatever clears the plan */
    PyObject *body = write_body(&self->plan);
    if (body != NULL)
        Py_CLEAR(self->records); /* written once: the records may go */
    Py_DECREF(records);
    return body;
}

static PyObject *
Plan_size(PlanObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->plan.size);
}

static PyObject *
Plan_base_ts(PlanObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->plan.base_ts);
}

static PyObject *
Plan_max_ts(PlanObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->plan.max_ts);
}

static PyMethodDef Plan_methods[] = {
    {"write", (PyCFunction)Plan_write, METH_NOARGS, "The body (once): what encode_body returns first."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Plan_getset[] = {
    {"size", (getter)Plan_size, NULL, "The body's size in bytes.", NULL},
    {"base_ts", (getter)Plan_base_ts, NULL, "The batch's base timestamp.", NULL},
    {"max_ts", (getter)Plan_max_ts, NULL, "The batch's largest timestamp.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "seglog.segments._speedups.Plan",
    .tp_doc = "A checked and sized batch body, written by write() (see body_plan).",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_traverse = (traverseproc)Plan_traverse,
    .tp_clear = (inquiry)Plan_clear,
    .tp_methods = Plan_methods,
    .tp_getset = Plan_getset,
};

static PyObject *
body_plan(PyObject *self, PyObject *args)
{
    PyObject *records;
    int log_append;
    long long now_ms;
    if (!PyArg_ParseTuple(args, "O!pL", &PyTuple_Type, &records, &log_append, &now_ms))
        return NULL;
    BodyPlan plan;
    if (!plan_body(records, log_append, now_ms, &plan))
        Py_RETURN_NONE;
    PlanObject *planned = PyObject_GC_New(PlanObject, &PlanType);
    if (planned == NULL)
        return NULL;
    Py_INCREF(records);
    planned->records = records;
    planned->plan = plan; /* plan.items points into `records`, which the Plan keeps */
    PyObject_GC_Track((PyObject *)planned);
    return (PyObject *)planned;
}

/*
 * range_ok(timestamp_deltas | None, keys, values, headers | None, lo, hi,
 *          min_delta, top, check_values, check_top) -> bool
 *
 * batch._range_problem(...) is None, for the entries lo..hi-1 of columns
 * whose lengths batch._body_shape already checked: every timestamp delta an
 * int (and, with check_values, in [min_delta, top]; with check_top the
 * largest equal to top), every key and value bytes or None, every headers
 * entry a tuple of (str, bytes) pairs.
 */
static PyObject *
range_ok(PyObject *self, PyObject *args)
{
    PyObject *ts, *keys, *values, *headers;
    Py_ssize_t lo, hi;
    long long min_delta, top;
    int check_values, check_top;
    if (!PyArg_ParseTuple(args, "OOOOnnLLpp", &ts, &keys, &values, &headers, &lo, &hi, &min_delta, &top,
                          &check_values, &check_top))
        return NULL;
    if (!PyTuple_CheckExact(keys) || !PyTuple_CheckExact(values) || lo < 0 || hi > PyTuple_GET_SIZE(keys) ||
        hi > PyTuple_GET_SIZE(values))
        Py_RETURN_FALSE;
    if (ts != Py_None && (!PyTuple_CheckExact(ts) || hi > PyTuple_GET_SIZE(ts)))
        Py_RETURN_FALSE;
    if (headers != Py_None && (!PyTuple_CheckExact(headers) || hi > PyTuple_GET_SIZE(headers)))
        Py_RETURN_FALSE;
    if (ts != Py_None && lo < hi) {
        long long highest = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            PyObject *d = PyTuple_GET_ITEM(ts, i);
            if (!PyLong_CheckExact(d))
                Py_RETURN_FALSE;
            if (!check_values)
                continue;
            long long v;
            if (!int64_of(d, &v) || v < min_delta || v > top)
                Py_RETURN_FALSE;
            if (i == lo || v > highest)
                highest = v;
        }
        if (check_values && check_top && highest != top)
            Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (!is_bin(PyTuple_GET_ITEM(keys, i)) || !is_bin(PyTuple_GET_ITEM(values, i)))
            Py_RETURN_FALSE;
    }
    if (headers != Py_None) {
        for (Py_ssize_t i = lo; i < hi; i++) {
            if (!headers_ok(PyTuple_GET_ITEM(headers, i)))
                Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/*
 * build_records(record_type, values, keys, timestamp_deltas | None, headers | None,
 *               offset_deltas | None, lo, hi, base_offset, base_ts, fixed_ts) -> list
 *
 * The Records of entries lo..hi-1, checked by range_ok first: offset
 * base_offset + offset_deltas[i] (offset_deltas None: dense, base_offset + i),
 * timestamp fixed_ts when it is >= 0 (LogAppendTime or a nil column), else
 * base_ts + timestamp_deltas[i]; headers () when the column is None.
 * None when the arguments are not as range_ok left them, or an offset or a
 * timestamp leaves int64 (possible only with a header check_header refuses).
 */
static PyObject *
build_records(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    PyObject *values, *keys, *ts, *headers, *offsets;
    Py_ssize_t lo, hi;
    long long base_offset, base_ts, fixed_ts;
    if (!PyArg_ParseTuple(args, "O!OOOOOnnLLL", &PyType_Type, &type, &values, &keys, &ts, &headers, &offsets, &lo,
                          &hi, &base_offset, &base_ts, &fixed_ts))
        return NULL;
    if (!PyType_IsSubtype(type, &PyTuple_Type) || !PyTuple_CheckExact(values) || !PyTuple_CheckExact(keys) ||
        lo < 0 || lo > hi || hi > PyTuple_GET_SIZE(values) || hi > PyTuple_GET_SIZE(keys))
        Py_RETURN_NONE;
    if (fixed_ts < 0 && (!PyTuple_CheckExact(ts) || hi > PyTuple_GET_SIZE(ts)))
        Py_RETURN_NONE;
    if (headers != Py_None && (!PyTuple_CheckExact(headers) || hi > PyTuple_GET_SIZE(headers)))
        Py_RETURN_NONE;
    if (offsets != Py_None && (!PyTuple_CheckExact(offsets) || hi > PyTuple_GET_SIZE(offsets)))
        Py_RETURN_NONE;

    PyObject *empty = PyTuple_New(0); /* the shared empty tuple */
    PyObject *fixed = fixed_ts >= 0 ? PyLong_FromLongLong(fixed_ts) : NULL;
    PyObject *out = PyList_New(hi - lo);
    if (empty == NULL || out == NULL || (fixed_ts >= 0 && fixed == NULL))
        goto error;
    for (Py_ssize_t i = lo; i < hi; i++) {
        long long offset, delta;
        if (offsets == Py_None)
            delta = i;
        else if (!int64_of(PyTuple_GET_ITEM(offsets, i), &delta))
            goto fallback;
        if (!add_int64(base_offset, delta, &offset))
            goto fallback;
        PyObject *timestamp;
        if (fixed != NULL) {
            timestamp = fixed;
            Py_INCREF(timestamp);
        }
        else {
            long long at;
            if (!int64_of(PyTuple_GET_ITEM(ts, i), &delta) || !add_int64(base_ts, delta, &at))
                goto fallback;
            timestamp = PyLong_FromLongLong(at);
            if (timestamp == NULL)
                goto error;
        }
        PyObject *off = PyLong_FromLongLong(offset);
        if (off == NULL) {
            Py_DECREF(timestamp);
            goto error;
        }
        PyObject *record = type->tp_alloc(type, 5);
        if (record == NULL) {
            Py_DECREF(timestamp);
            Py_DECREF(off);
            goto error;
        }
        PyObject *v = PyTuple_GET_ITEM(values, i), *k = PyTuple_GET_ITEM(keys, i);
        PyObject *h = headers == Py_None ? empty : PyTuple_GET_ITEM(headers, i);
        Py_INCREF(v);
        Py_INCREF(k);
        Py_INCREF(h);
        PyTuple_SET_ITEM(record, 0, v);
        PyTuple_SET_ITEM(record, 1, k);
        PyTuple_SET_ITEM(record, 2, timestamp);
        PyTuple_SET_ITEM(record, 3, h);
        PyTuple_SET_ITEM(record, 4, off);
        PyList_SET_ITEM(out, i - lo, record);
    }
    Py_DECREF(empty);
    Py_XDECREF(fixed);
    return out;

fallback: /* the list's unset items are NULL, which its dealloc skips */
    Py_DECREF(empty);
    Py_XDECREF(fixed);
    Py_DECREF(out);
    Py_RETURN_NONE;

error:
    Py_XDECREF(empty);
    Py_XDECREF(fixed);
    Py_XDECREF(out);
    return NULL;
}

/* ---- a bounded reader of the msgpack subset a batch body uses, for the Arrow path ---- */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Cursor;

/* Each reader returns 1 and advances on success, 0 (cursor unspecified) on anything else. */

static inline int
take_be(Cursor *c, int n, unsigned long long *out)
{
    if (c->end - c->p < n)
        return 0;
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | c->p[i];
    c->p += n;
    *out = v;
    return 1;
}

static int
take_array_header(Cursor *c, Py_ssize_t *n)
{
    if (c->p >= c->end)
        return 0;
    unsigned char b = *c->p++;
    unsigned long long v;
    if ((b & 0xf0) == 0x90) {
        *n = b & 0x0f;
        return 1;
    }
    if (b == 0xdc && take_be(c, 2, &v)) {
        *n = (Py_ssize_t)v;
        return 1;
    }
    if (b == 0xdd && take_be(c, 4, &v)) {
        *n = (Py_ssize_t)v;
        return 1;
    }
    return 0;
}

static int
take_nil(Cursor *c)
{
    if (c->p < c->end && *c->p == 0xc0) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Any msgpack integer that fits an int64 (a uint64 above 2**63-1 is refused). */
static int
take_int(Cursor *c, long long *out)
{
    if (c->p >= c->end)
        return 0;
    unsigned char b = *c->p++;
    unsigned long long v;
    if (b <= 0x7f) {
        *out = b;
        return 1;
    }
    if (b >= 0xe0) {
        *out = (long long)(signed char)b;
        return 1;
    }
    switch (b) {
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        int n = 1 << (b - 0xcc);
        if (!take_be(c, n, &v) || v > (unsigned long long)LLONG_MAX)
            return 0;
        *out = (long long)v;
        return 1;
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int n = 1 << (b - 0xd0); /* int8/16/32/64, big-endian two's complement */
        if (!take_be(c, n, &v))
            return 0;
        /* sign-extend without a signed overflow: below 64 bits v < 2**56, so the difference fits */
        *out = n == 8 ? (long long)v : (long long)v - ((v >> (8 * n - 1)) ? (1LL << (8 * n)) : 0);
        return 1;
    }
    default:
        return 0;
    }
}

/* bin (0xc4-0xc6) or nil: *data NULL for nil. */
static int
take_bin_or_nil(Cursor *c, const unsigned char **data, Py_ssize_t *len)
{
    if (c->p >= c->end)
        return 0;
    unsigned char b = *c->p++;
    unsigned long long n;
    if (b == 0xc0) {
        *data = NULL;
        *len = 0;
        return 1;
    }
    if (b < 0xc4 || b > 0xc6 || !take_be(c, 1 << (b - 0xc4), &n) || (unsigned long long)(c->end - c->p) < n)
        return 0;
    *data = c->p;
    *len = (Py_ssize_t)n;
    c->p += n;
    return 1;
}

static int
take_str(Cursor *c, const unsigned char **data, Py_ssize_t *len)
{
    if (c->p >= c->end)
        return 0;
    unsigned char b = *c->p++;
    unsigned long long n;
    if ((b & 0xe0) == 0xa0)
        n = b & 0x1f;
    else if (b < 0xd9 || b > 0xdb || !take_be(c, 1 << (b - 0xd9), &n))
        return 0;
    if ((unsigned long long)(c->end - c->p) < n)
        return 0;
    *data = c->p;
    *len = (Py_ssize_t)n;
    c->p += n;
    return 1;
}

/*
 * The timestamp column at the cursor: nil, or `count` ints within [-base_ts, max_ts - base_ts]
 * (any int64 with LogAppendTime) whose largest is max_ts - base_ts. Each record's timestamp
 * (what a Record carries) goes to timestamps[i - lo] for lo <= i < hi when `timestamps` is given.
 * 1 on success, 0 for anything else.
 */
static int
take_timestamps(Cursor *c, Py_ssize_t count, long long base_ts, long long max_ts, int log_append, Py_ssize_t lo,
                Py_ssize_t hi, long long *timestamps)
{
    Py_ssize_t n;
    if (take_nil(c)) {
        if (!log_append && max_ts != base_ts)
            return 0;
        if (timestamps != NULL)
            for (Py_ssize_t i = lo; i < hi; i++)
                timestamps[i - lo] = log_append ? max_ts : base_ts;
        return 1;
    }
    if (!take_array_header(c, &n) || n != count)
        return 0;
    long long top = max_ts - base_ts, highest = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        long long d;
        if (!take_int(c, &d))
            return 0;
        if (!log_append && (d < -base_ts || d > top))
            return 0;
        if (i == 0 || d > highest)
            highest = d;
        if (timestamps != NULL && i >= lo && i < hi)
            timestamps[i - lo] = log_append ? max_ts : base_ts + d;
    }
    return log_append || highest == top;
}

/*
 * Appends the bin/nil column of `count` entries at the cursor: entries lo..hi-1 go to
 * `offsets` (int32 end offsets, plus `base`), `data` and `valid` (one byte per row);
 * all entries are checked. Returns the number of nulls among lo..hi-1, or -1.
 */
static Py_ssize_t
take_binary_column(Cursor *c, Py_ssize_t count, Py_ssize_t lo, Py_ssize_t hi, long long base, PyObject **offsets,
                   PyObject **data, PyObject **valid)
{
    Py_ssize_t n;
    if (!take_array_header(c, &n) || n != count)
        return -1;
    /* Pass 1: sizes (and every entry checked). */
    const unsigned char *start = c->p;
    long long total = 0;
    Py_ssize_t nulls = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *d;
        Py_ssize_t len;
        if (!take_bin_or_nil(c, &d, &len))
            return -1;
        if (i >= lo && i < hi) {
            total += len;
            nulls += d == NULL;
        }
    }
    if (total > INT32_MAX - base)
        return -1; /* past Arrow's int32 binary offsets (base <= INT32_MAX: arrow_batch checks) */
    *offsets = PyBytes_FromStringAndSize(NULL, (hi - lo) * 4);
    *data = PyBytes_FromStringAndSize(NULL, total);
    *valid = nulls ? PyBytes_FromStringAndSize(NULL, hi - lo) : (Py_INCREF(Py_None), Py_None);
    if (*offsets == NULL || *data == NULL || *valid == NULL)
        return -1;
    Cursor again = {start, c->end};
    int32_t *off = (int32_t *)PyBytes_AS_STRING(*offsets);
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(*data);
    unsigned char *ok = nulls ? (unsigned char *)PyBytes_AS_STRING(*valid) : NULL;
    long long at = base;
    for (Py_ssize_t i = 0; i < hi; i++) {
        const unsigned char *d;
        Py_ssize_t len;
        take_bin_or_nil(&again, &d, &len); /* succeeded in pass 1 */
        if (i < lo)
            continue;
        memcpy(out, d == NULL ? out : d, (size_t)len);
        out += len;
        at += len;
        off[i - lo] = (int32_t)at;
        if (ok)
            ok[i - lo] = d != NULL;
    }
    return nulls;
}

/*
 * The headers column at the cursor: nil (*out = NULL), or `count` arrays of [str, bin] pairs, the
 * pairs of entries lo..hi-1 as tuples of (str, bytes) in a new list (*out). Every entry is checked
 * and every name decoded (msgpack checks each str of a body, so a bad one anywhere fails the read).
 * 1 on success, 0 for anything else (no exception set), -1 on a Python error.
 */
static int
take_headers_column(Cursor *c, Py_ssize_t count, Py_ssize_t lo, Py_ssize_t hi, PyObject **out)
{
    Py_ssize_t n;
    *out = NULL;
    if (take_nil(c))
        return 1;
    if (!take_array_header(c, &n) || n != count)
        return 0;
    PyObject *headers = PyList_New(hi - lo);
    if (headers == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t pairs;
        if (!take_array_header(c, &pairs) || pairs > (c->end - c->p) / 4)
            goto fallback; /* a pair takes 4 bytes or more (92 a0 c4 00): bounds PyTuple_New */
        int keep = i >= lo && i < hi;
        PyObject *tuple = keep ? PyTuple_New(pairs) : NULL;
        if (keep && tuple == NULL)
            goto error;
        for (Py_ssize_t j = 0; j < pairs; j++) {
            Py_ssize_t two, key_len, value_len;
            const unsigned char *key, *value;
            if (!take_array_header(c, &two) || two != 2 || !take_str(c, &key, &key_len) ||
                !take_bin_or_nil(c, &value, &value_len) || value == NULL) {
                Py_XDECREF(tuple);
                goto fallback;
            }
            PyObject *name = PyUnicode_DecodeUTF8((const char *)key, key_len, NULL);
            if (name == NULL) {
                PyErr_Clear(); /* not UTF-8: the Python path reports it */
                Py_XDECREF(tuple);
                goto fallback;
            }
            if (tuple == NULL) {
                Py_DECREF(name);
                continue;
            }
            PyObject *bin = PyBytes_FromStringAndSize((const char *)value, value_len);
            PyObject *pair = bin == NULL ? NULL : PyTuple_Pack(2, name, bin);
            Py_DECREF(name);
            Py_XDECREF(bin);
            if (pair == NULL) {
                Py_DECREF(tuple);
                goto error;
            }
            PyTuple_SET_ITEM(tuple, j, pair);
        }
        if (tuple != NULL)
            PyList_SET_ITEM(headers, i - lo, tuple);
    }
    *out = headers;
    return 1;

fallback: /* the list's unset items are NULL, which its dealloc skips */
    Py_DECREF(headers);
    return 0;
error:
    Py_DECREF(headers);
    return -1;
}

/*
 * arrow_batch(buf, body_start, body_end, count, last_offset_delta, base_ts, max_ts, log_append,
 *             lo, hi, keys_base, values_base)
 *   -> (timestamps, key_offsets, key_data, key_valid, value_offsets, value_data, value_valid, headers)
 *      | None
 *
 * The records lo..hi-1 of a batch body (dense offsets: a nil offset column) as column buffers
 * for Arrow: int64 millisecond timestamps, int32 binary end offsets (plus keys_base /
 * values_base, the data bytes already in the chunk), the bytes, one validity byte per row
 * (None when no row is null), and the headers as a list of tuples (None when the column is
 * nil). The whole body is checked as batch._body_columns does; None for anything else
 * (including a body that is fine but not dense), so the Python path decides.
 */
static PyObject *
arrow_batch(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t body_start, body_end, count, lo, hi;
    long long last_offset_delta, base_ts, max_ts, keys_base, values_base;
    int log_append;
    if (!PyArg_ParseTuple(args, "y*nnnLLLpnnLL", &view, &body_start, &body_end, &count, &last_offset_delta, &base_ts,
                          &max_ts, &log_append, &lo, &hi, &keys_base, &values_base))
        return NULL;
    PyObject *ts = NULL, *ko = NULL, *kd = NULL, *kv = NULL, *vo = NULL, *vd = NULL, *vv = NULL, *headers = NULL;
    PyObject *result = NULL;
    if (body_start < 0 || body_start > body_end || body_end > view.len || count < 1 || lo < 0 || lo >= hi ||
        hi > count || last_offset_delta != count - 1 || base_ts < 0 || max_ts < base_ts || keys_base < 0 ||
        keys_base > INT32_MAX || values_base < 0 || values_base > INT32_MAX ||
        count > (body_end - body_start - 6) / 2)
        goto fallback; /* the last: FORMAT.md 2.2, count * 2 + 6 <= body bytes, bounds every allocation below */
    Cursor c = {(const unsigned char *)view.buf + body_start, (const unsigned char *)view.buf + body_end};
    Py_ssize_t n;
    if (!take_array_header(&c, &n) || n != 5 || !take_nil(&c))
        goto fallback;

    /* Timestamps: nil, or `count` ints within the header's range whose largest is its max. */
    ts = PyBytes_FromStringAndSize(NULL, (hi - lo) * 8);
    if (ts == NULL)
        goto error;
    if (!take_timestamps(&c, count, base_ts, max_ts, log_append, lo, hi, (long long *)PyBytes_AS_STRING(ts)))
        goto fallback;

    if (take_binary_column(&c, count, lo, hi, keys_base, &ko, &kd, &kv) < 0 ||
        take_binary_column(&c, count, lo, hi, values_base, &vo, &vd, &vv) < 0) {
        if (PyErr_Occurred())
            goto error;
        goto fallback;
    }

    switch (take_headers_column(&c, count, lo, hi, &headers)) {
    case -1:
        goto error;
    case 0:
        goto fallback;
    }
    if (headers == NULL) { /* a nil column: None for the Arrow path */
        headers = Py_None;
        Py_INCREF(headers);
    }
    if (c.p != c.end)
        goto fallback; /* trailing bytes after the five columns */
    result = PyTuple_Pack(8, ts, ko, kd, kv, vo, vd, vv, headers);
    goto done;

fallback:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ts);
    Py_XDECREF(ko);
    Py_XDECREF(kd);
    Py_XDECREF(kv);
    Py_XDECREF(vo);
    Py_XDECREF(vd);
    Py_XDECREF(vv);
    Py_XDECREF(headers);
    PyBuffer_Release(&view);
    return result;
}

/* ---- Records straight from a batch body (the read path) ---- */

typedef struct {
    const unsigned char *key, *value; /* NULL: nil */
    Py_ssize_t key_len, value_len;
} Entry;

/* Entries of a batch this small are kept on the stack (a fetch of one-record batches reads thousands). */
#define STACK_ENTRIES 8

/* A bin or nil as bytes or None (a new reference). */
static PyObject *
bytes_or_none(const unsigned char *data, Py_ssize_t len)
{
    if (data == NULL)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)data, len);
}


/*
 * decode_records(record_type, buf, body_start, body_end, count, last_offset_delta, base_offset,
 *                base_ts, max_ts, log_append, lo, max_bytes) -> list[Record] | None
 *
 * The Records of a dense batch body (nil offset column) from entry `lo` on: all of them when
 * max_bytes < 0, else up to the first whose key and value bytes bring the total to max_bytes
 * (at least one), as batch.decode_batch builds them. The whole body is checked (every entry,
 * every header name decoded, no trailing bytes); None for anything else, so the Python path
 * decides (it raises for a bad body and reads a valid one this function does not take).
 */
/*
 * The core of decode_records, on the body bytes [body, body + body_len): a new list (`into` NULL),
 * or the Records appended to the list `into` and a new reference to True; a new reference to None
 * (decline: nothing appended), or NULL with an exception set (`into` as it was).
 *
 * Each Record is untracked by the cycle collector once built: it holds only bytes, None, ints and
 * tuples of (str, bytes) pairs, none of which can lead back to it, and a fetch of a megabyte of
 * small records otherwise has the collector walk thousands of live Records on every young
 * collection while the list is built (the same reasoning as CPython's own untracking of tuples of
 * atomic items; a cycle through the Record class itself would be kept, never freed early).
 */
static PyObject *
records_into(PyTypeObject *type, const unsigned char *body, Py_ssize_t body_len, Py_ssize_t count,
             long long last_offset_delta, long long base_offset, long long base_ts, long long max_ts,
             int log_append, Py_ssize_t lo, long long max_bytes, PyObject *into)
{
    long long last;
    Entry small_entries[STACK_ENTRIES];
    long long small_stamps[STACK_ENTRIES];
    Entry *entries = NULL;
    long long *stamps = NULL;
    Py_ssize_t at = -1; /* where the Records go in `out` (-1: nothing placed yet) */
    PyObject *out = NULL, *empty = NULL, *headers = NULL, *result = NULL;
    if (!PyType_IsSubtype(type, &PyTuple_Type) || body_len < 0 || count < 1 || lo < 0 || lo >= count ||
        last_offset_delta != count - 1 || base_offset < 0 || !add_int64(base_offset, last_offset_delta, &last) ||
        base_ts < 0 || max_ts < base_ts || count > (body_len - 6) / 2)
        goto fallback; /* the last: FORMAT.md 2.2, count * 2 + 6 <= body bytes, bounds the allocation below */
    Cursor c = {body, body + body_len};
    Py_ssize_t n, m = count - lo;
    if (!take_array_header(&c, &n) || n != 5 || !take_nil(&c))
        goto fallback;
    if (m <= STACK_ENTRIES) {
        entries = small_entries;
        stamps = small_stamps;
    }
    else {
        entries = PyMem_Malloc((size_t)m * sizeof(Entry));
        stamps = PyMem_Malloc((size_t)m * sizeof(long long));
    }
    if (entries == NULL || stamps == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if (!take_timestamps(&c, count, base_ts, max_ts, log_append, lo, count, stamps))
        goto fallback;
    for (int column = 0; column < 2; column++) {
        if (!take_array_header(&c, &n) || n != count)
            goto fallback;
        for (Py_ssize_t i = 0; i < count; i++) {
            const unsigned char *d;
            Py_ssize_t len;
            if (!take_bin_or_nil(&c, &d, &len))
                goto fallback;
            if (i < lo)
                continue;
            if (column == 0) {
                entries[i - lo].key = d;
                entries[i - lo].key_len = len;
            }
            else {
                entries[i - lo].value = d;
                entries[i - lo].value_len = len;
            }
        }
    }
    /* How many records the read takes (batch._records_within). */
    Py_ssize_t hi = count;
    if (max_bytes >= 0) {
        long long total = 0;
        for (hi = lo; hi < count;) {
            total += entries[hi - lo].key_len + entries[hi - lo].value_len;
            hi++;
            if (total >= max_bytes)
                break;
        }
    }

    empty = PyTuple_New(0);
    if (empty == NULL)
        goto error;
    switch (take_headers_column(&c, count, lo, hi, &headers)) { /* NULL: every record gets () */
    case -1:
        goto error;
    case 0:
        goto fallback;
    }
    if (c.p != c.end)
        goto fallback; /* trailing bytes after the five columns */

    if (into == NULL) {
        at = 0;
        out = PyList_New(hi - lo);
        if (out == NULL)
            goto error;
    }
    else {
        /* `into` grows by hi - lo placeholders (list.append's over-allocation), replaced one by one */
        at = PyList_GET_SIZE(into);
        out = into;
        Py_INCREF(out);
        for (Py_ssize_t i = lo; i < hi; i++)
            if (PyList_Append(out, Py_None) < 0)
                goto error;
    }
    for (Py_ssize_t i = lo; i < hi; i++) {
        Entry *e = &entries[i - lo];
        PyObject *record = type->tp_alloc(type, 5);
        if (record == NULL)
            goto error;
        if (into != NULL)
            Py_DECREF(PyList_GET_ITEM(out, at + i - lo)); /* the None placeholder */
        PyList_SET_ITEM(out, at + i - lo, record); /* owned by the list from here: cleaned up with it */
        PyObject *h = headers == NULL ? empty : PyList_GET_ITEM(headers, i - lo);
        Py_INCREF(h);
        PyTuple_SET_ITEM(record, 3, h);
        if (!fill_record(record, bytes_or_none(e->value, e->value_len), bytes_or_none(e->key, e->key_len),
                         PyLong_FromLongLong(stamps[i - lo]), PyLong_FromLongLong(base_offset + i)))
            goto error;
    }
    if (into != NULL) {
        result = Py_True;
        Py_INCREF(result);
    }
    else {
        result = out;
        out = NULL;
    }
    goto done;

fallback:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
    if (into != NULL && at >= 0) { /* `into` as it was: the caller's list never holds a partial batch */
        PyObject *type_, *value, *traceback;
        PyErr_Fetch(&type_, &value, &traceback);
        PyList_SetSlice(into, at, PyList_GET_SIZE(into), NULL);
        PyErr_Restore(type_, value, traceback);
    }
done:
    if (entries != small_entries)
        PyMem_Free(entries);
    if (stamps != small_stamps)
        PyMem_Free(stamps);
    Py_XDECREF(out);
    Py_XDECREF(empty);
    Py_XDECREF(headers);
    return result;
}

static PyObject *
records_of_body(PyTypeObject *type, const unsigned char *body, Py_ssize_t body_len, Py_ssize_t count,
                long long last_offset_delta, long long base_offset, long long base_ts, long long max_ts,
                int log_append, Py_ssize_t lo, long long max_bytes)
{
    return records_into(type, body, body_len, count, last_offset_delta, base_offset, base_ts, max_ts, log_append,
                        lo, max_bytes, NULL);
}

static PyObject *
decode_records(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    Py_buffer view;
    Py_ssize_t body_start, body_end, count, lo;
    long long last_offset_delta, base_offset, base_ts, max_ts, max_bytes;
    int log_append;
    if (!PyArg_ParseTuple(args, "O!y*nnnLLLLpnL", &PyType_Type, &type, &view, &body_start, &body_end, &count,
                          &last_offset_delta, &base_offset, &base_ts, &max_ts, &log_append, &lo, &max_bytes))
        return NULL;
    PyObject *result;
    if (body_start < 0 || body_start > body_end || body_end > view.len) {
        result = Py_None;
        Py_INCREF(result);
    }
    else
        result = records_of_body(type, (const unsigned char *)view.buf + body_start, body_end - body_start, count,
                                 last_offset_delta, base_offset, base_ts, max_ts, log_append, lo, max_bytes);
    PyBuffer_Release(&view);
    return result;
}

/* ---- one whole batch: header checks, CRC, Records (a point read) ---- */

/* FORMAT.md 2.1, as segments/batch.py defines them (test_speedups checks that they agree). */
#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_OFFSET 17
#define CRC_START 21
#define MAGIC 0x54
#define KNOWN_ATTRIBUTES 0x3F
#define COMPRESSION_MASK 0x07
#define TIMESTAMP_TYPE_BIT 0x08
#define MIN_BATCH_SIZE 69
#define MIN_RECORD_BYTES 2
#define BODY_FIXED_BYTES 6

#define CONTROL_BIT 0x20
#define TRANSACTIONAL_BIT 0x10

static inline unsigned long long
be(const unsigned char *p, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* The fields of a batch header (FORMAT.md 2.1), as batch.read_header unpacks them. */
typedef struct {
    long long base_offset, size, last_offset_delta, base_ts, max_ts, producer_id, count;
    long long last; /* base_offset + last_offset_delta, set by plain_header_ok */
    unsigned long long crc;
    unsigned magic;
    int attributes;
} Header;

static inline void
parse_header(const unsigned char *p, Header *h)
{
    h->base_offset = (long long)be(p, 8);
    h->size = LOG_OVERHEAD + (long long)(int32_t)be(p + 8, 4);
    h->magic = p[16];
    h->crc = be(p + CRC_OFFSET, 4);
    h->attributes = (int16_t)be(p + 21, 2);
    h->last_offset_delta = (int32_t)be(p + 23, 4);
    h->base_ts = (long long)be(p + 27, 8);
    h->max_ts = (long long)be(p + 35, 8);
    h->producer_id = (long long)be(p + 43, 8);
    h->count = (int32_t)be(p + 57, 4);
    h->last = -1;
}

/*
 * Whether `h` is a seglog batch header batch.header_problem passes with max_batch_bytes `max_size`
 * (magic, lengths, attribute bits, no compression, no control bit, a transactional batch's producer,
 * the record count, the offset range, the timestamps); sets h->last. The one copy of those rules
 * here: every reader of this module checks headers with it. A Kafka batch (magic 2) is never
 * plain: its rules are kafka_batch.header_problem's, in Python.
 */
static inline int
plain_header_ok(Header *h, long long max_size)
{
    return h->magic == MAGIC && h->size >= MIN_BATCH_SIZE && h->size <= max_size &&
           !(h->attributes & ~KNOWN_ATTRIBUTES) && !(h->attributes & (COMPRESSION_MASK | CONTROL_BIT)) &&
           !((h->attributes & TRANSACTIONAL_BIT) && h->producer_id < 0) && h->count >= 1 &&
           h->count <= h->last_offset_delta + 1 &&
           h->count * MIN_RECORD_BYTES + BODY_FIXED_BYTES <= h->size - HEADER_SIZE && h->base_offset >= 0 &&
           add_int64(h->base_offset, h->last_offset_delta, &h->last) && h->max_ts >= h->base_ts && h->base_ts >= 0;
}

#define KAFKA_MAGIC 2

/*
 * Whether `h` is a Kafka RecordBatch v2 header kafka_batch.header_problem passes with max_batch_bytes
 * `max_size`, and a plain one the fetch loop reads in C: uncompressed and not a control batch (those
 * are the Python loop's). Sets h->last.
 */
static inline int
plain_kafka_header_ok(Header *h, long long max_size)
{
    return h->magic == KAFKA_MAGIC && h->size - HEADER_SIZE >= 1 && h->size <= max_size &&
           !(h->attributes & ~KNOWN_ATTRIBUTES) && !(h->attributes & (COMPRESSION_MASK | CONTROL_BIT)) &&
           !((h->attributes & TRANSACTIONAL_BIT) && h->producer_id < 0) && h->count >= 1 &&
           h->count <= h->last_offset_delta + 1 && h->count * KAFKA_MIN_RECORD_BYTES <= h->size - HEADER_SIZE &&
           h->base_offset >= 0 && add_int64(h->base_offset, h->last_offset_delta, &h->last) && h->max_ts >= 0 &&
           ((h->attributes & TIMESTAMP_TYPE_BIT) || (h->base_ts >= 0 && h->base_ts <= h->max_ts));
}

/*
 * google-crc32c's own C function, crc32c_extend(crc, data, size) of its C API (crc32c/crc32c.h), when
 * batch.py found its library loaded (use_native_crc32c): the CRC of a small batch then costs no
 * bytes copy and no Python call (for one-record batches those were most of a fetch's time). NULL:
 * the crc32c object passed in (google_crc32c.value) is called on a bytes copy.
 */
typedef uint32_t (*crc32c_extend_fn)(uint32_t crc, const uint8_t *data, size_t count);
static crc32c_extend_fn native_crc32c = NULL;

/* The CRC-32C of data[0:size] into *out: 1, or 0 with an exception set (`crc32c` failed). */
static int
crc32c_of(PyObject *crc32c, const unsigned char *data, Py_ssize_t size, unsigned long long *out)
{
    if (native_crc32c != NULL) {
        *out = native_crc32c(0, data, (size_t)size);
        return 1;
    }
    PyObject *covered = PyBytes_FromStringAndSize((const char *)data, size);
    if (covered == NULL)
        return 0;
    PyObject *computed = PyObject_CallOneArg(crc32c, covered);
    Py_DECREF(covered);
    if (computed == NULL)
        return 0;
    *out = PyLong_AsUnsignedLongLong(computed);
    Py_DECREF(computed);
    return !(*out == (unsigned long long)-1 && PyErr_Occurred());
}

/*
 * batch_records(record_type, crc32c, buf, start_offset, max_bytes[, min_timestamp]) -> list[Record] | None
 *
 * What a read of the batch at the start of `buf` returns, as FetchData.records builds it, for a seglog
 * batch or a plain Kafka one (uncompressed, not a control batch): the header checked as
 * batch.header_problem checks it (plain_header_ok, plain_kafka_header_ok; max_batch_bytes: len(buf)),
 * the batch whole in `buf`, its CRC-32C (crc32c_of) equal to the header's, and its body read (by
 * records_of_body, kafka_records_into) from start_offset on, up to max_bytes (-1: every record);
 * for a Kafka batch with min_timestamp, from the first record at or after start_offset whose
 * timestamp is >= min_timestamp (a time lookup; [] when none is: every record was still checked). None when anything is not exactly so: the Python path then
 * raises the documented error (or reads what this function does not take).
 */
static PyObject *
batch_records(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    PyObject *crc32c;
    Py_buffer view;
    long long start_offset, max_bytes, min_ts = LLONG_MIN;
    if (!PyArg_ParseTuple(args, "O!Oy*LL|L", &PyType_Type, &type, &crc32c, &view, &start_offset, &max_bytes,
                          &min_ts))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *p = view.buf;
    Header h;
    if (view.len < HEADER_SIZE)
        goto fallback;
    parse_header(p, &h);
    int kafka = h.magic == KAFKA_MAGIC;
    if (!(kafka ? plain_kafka_header_ok(&h, view.len) : plain_header_ok(&h, view.len)) || start_offset > h.last ||
        (min_ts != LLONG_MIN && !kafka))
        goto fallback; /* (record_at_time searches seglog's batches by time) */
    unsigned long long value;
    if (!crc32c_of(crc32c, p + CRC_START, (Py_ssize_t)(h.size - CRC_START), &value))
        goto error;
    if (value != h.crc)
        goto fallback; /* the Python path reports the mismatch */
    if (kafka) {
        result = PyList_New(0);
        if (result == NULL)
            goto error;
        int took = kafka_records_into(type, p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE), h.count,
                                      h.base_offset, h.base_ts, h.max_ts, h.last_offset_delta,
                                      h.attributes & TIMESTAMP_TYPE_BIT, start_offset, min_ts,
                                      max_bytes < 0 ? -1 : max_bytes, result);
        if (took == 1)
            goto done;
        Py_CLEAR(result);
        if (took < 0)
            goto error;
        goto fallback;
    }
    long long lo = start_offset > h.base_offset ? start_offset - h.base_offset : 0;
    result = records_of_body(type, p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE), (Py_ssize_t)h.count,
                             h.last_offset_delta, h.base_offset, h.base_ts, h.max_ts,
                             h.attributes & TIMESTAMP_TYPE_BIT, (Py_ssize_t)lo, max_bytes < 0 ? -1 : max_bytes);
    goto done;

fallback:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---- many whole batches: the walk of a fetch (batch.decode_batches, whole_batches_length) ---- */


#if defined(__has_include)
#if __has_include(<dlfcn.h>)
#include <dlfcn.h>
#define HAVE_DLFCN 1
#endif
#endif

/*
 * use_native_crc32c(path) -> bool
 *
 * Look up crc32c_extend in the already loaded module at `path` (google_crc32c's _crc32c extension;
 * the symbol is its bundled libcrc32c's, a dependency of that module) and use it from now on if it
 * gives the CRC-32C check value of "123456789" (0xE3069283) and of a longer buffer `check` whose CRC
 * google_crc32c computed (`expected`). False, and nothing changes, otherwise (the module is not
 * loaded, has no such symbol, or this platform has no dlopen).
 */
static PyObject *
use_native_crc32c(PyObject *self, PyObject *args)
{
    const char *path;
    Py_buffer check;
    unsigned long long expected;
    if (!PyArg_ParseTuple(args, "sy*K", &path, &check, &expected))
        return NULL;
    int ok = 0;
#ifdef HAVE_DLFCN
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); /* only if Python loaded it already */
    if (handle != NULL) {
        crc32c_extend_fn fn = (crc32c_extend_fn)dlsym(handle, "crc32c_extend");
        if (fn != NULL && fn(0, (const uint8_t *)"123456789", 9) == 0xE3069283u &&
            fn(0, (const uint8_t *)check.buf, (size_t)check.len) == expected) {
            native_crc32c = fn; /* the handle stays open: the library stays loaded while it is used */
            ok = 1;
        }
        else
            dlclose(handle);
    }
#endif
    PyBuffer_Release(&check);
    return PyBool_FromLong(ok);
}

/* Whether batches_records computes CRCs with google-crc32c's C function (use_native_crc32c). */
static PyObject *
native_crc32c_in_use(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(native_crc32c != NULL);
}

#define NO_PRODUCER_ID_BE 0xFFFFFFFFFFFFFFFFull /* -1 in two's complement, in every width */

/*
 * encode_small_batch(records, log_append_time, now_ms, max_bytes) -> (batch, max_ts) | None
 *
 * batch.encode_small_batch in C: the whole batch encode_batch_parts makes (base offset 0, no
 * producer, not transactional) -- its 61 header bytes with the CRC-32C, then encode_body's body --
 * as one new bytearray, with its max timestamp. None when encode_body would return None, when the
 * batch would be larger than max_bytes, or when google-crc32c's C function is not in use
 * (use_native_crc32c): the Python path then decides, with its errors.
 */
static PyObject *
encode_small_batch(PyObject *self, PyObject *args)
{
    PyObject *records;
    int log_append;
    long long now_ms;
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTuple(args, "OpLn", &records, &log_append, &now_ms, &max_bytes))
        return NULL;
    BodyPlan plan;
    if (native_crc32c == NULL || !plan_body(records, log_append, now_ms, &plan))
        Py_RETURN_NONE;
    if (plan.size > max_bytes - HEADER_SIZE || plan.count > INT32_MAX)
        Py_RETURN_NONE;
    PyObject *batch = PyByteArray_FromStringAndSize(NULL, HEADER_SIZE + plan.size);
    if (batch == NULL)
        return NULL;
    unsigned char *start = (unsigned char *)PyByteArray_AS_STRING(batch);
    unsigned char *end = write_body_into(&plan, start + HEADER_SIZE);
    if (end != start + HEADER_SIZE + plan.size) { /* cannot happen: the sizes are exact */
        Py_DECREF(batch);
        PyErr_SetString(PyExc_SystemError, "seglog.segments._speedups.encode_small_batch: size mismatch");
        return NULL;
    }
    unsigned char *p = put_be(start, 0, 8);                               /* base offset */
    p = put_be(p, (unsigned long long)(HEADER_SIZE - LOG_OVERHEAD + plan.size), 4); /* batch length */
    p = put_be(p, NO_PRODUCER_ID_BE, 4);                                  /* partition leader epoch: -1 */
    *p++ = MAGIC;
    p += 4;                                                               /* the CRC, below */
    p = put_be(p, log_append ? TIMESTAMP_TYPE_BIT : 0, 2);               /* attributes */
    p = put_be(p, (unsigned long long)(plan.count - 1), 4);               /* last offset delta */
    p = put_be(p, (unsigned long long)plan.base_ts, 8);
    p = put_be(p, (unsigned long long)plan.max_ts, 8);
    p = put_be(p, NO_PRODUCER_ID_BE, 8);                                  /* producer id: -1 */
    p = put_be(p, NO_PRODUCER_ID_BE, 2);                                  /* producer epoch: -1 */
    p = put_be(p, NO_PRODUCER_ID_BE, 4);                                  /* base sequence: -1 */
    put_be(p, (unsigned long long)plan.count, 4);                         /* record count */
    put_be(start + CRC_OFFSET, native_crc32c(0, start + CRC_START, (size_t)(HEADER_SIZE - CRC_START + plan.size)), 4);
    return Py_BuildValue("(NL)", batch, plan.max_ts);
}

/*
 * batches_records(record_type, crc32c, buf, position, start_offset, max_batch_bytes, expected, into)
 *   -> (position, expected)
 *
 * batch.decode_batches' loop in one call: from `position` on, each batch of `buf` that is the plain
 * valid case of seglog's format, or an uncompressed Kafka batch that is not a control batch (read by
 * kafka_records_into, as kafka_batch.decode_records reads it) -- its header passes
 * batch.header_problem (max_batch_bytes: plain_header_ok, plain_kafka_header_ok), it lies
 * whole in `buf`, its base offset is `expected` (-1: any, the first batch of a read), its CRC-32C
 * (crc32c_of: google-crc32c's C function, else `crc32c`, google_crc32c.value) is the header's, and
 * records_into takes its body -- has its Records from start_offset on appended to the list `into`.
 * It stops before the first batch that is anything else (a compressed or control Kafka batch, a
 * corrupt one, a body
 * records_into declines, fewer than 61 bytes left) and returns that batch's position (len(buf)
 * after the last one) and the base offset the next batch must have (-1: no batch taken and none
 * given). The Python loop then takes over at exactly that batch: it reads it, or raises the
 * documented error, with its own messages. Nothing is appended for a batch it stops at.
 */
static PyObject *
batches_records(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    PyObject *crc32c, *into;
    Py_buffer view;
    Py_ssize_t position;
    long long start_offset, max_batch_bytes, expected;
    if (!PyArg_ParseTuple(args, "O!Oy*nLLLO!", &PyType_Type, &type, &crc32c, &view, &position, &start_offset,
                          &max_batch_bytes, &expected, &PyList_Type, &into))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    PyObject *result = NULL;
    if (position < 0 || !PyType_IsSubtype(type, &PyTuple_Type))
        goto done; /* result NULL: set below */
    while (end - position >= HEADER_SIZE) {
        const unsigned char *p = buf + position;
        Header h;
        parse_header(p, &h);
        long long room = max_batch_bytes < end - position ? max_batch_bytes : end - position;
        int kafka = h.magic == KAFKA_MAGIC;
        if (!(kafka ? plain_kafka_header_ok(&h, room) : plain_header_ok(&h, room)) || h.last == LLONG_MAX ||
            (expected >= 0 && h.base_offset != expected))
            break; /* the last offset INT64_MAX: the next expected one is not an int64, Python's to handle */
        unsigned long long value;
        if (!crc32c_of(crc32c, p + CRC_START, (Py_ssize_t)(h.size - CRC_START), &value))
            goto done;
        if (value != h.crc)
            break; /* the Python path reports the mismatch */
        if (h.last >= start_offset && kafka) {
            int took = kafka_records_into(type, p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE), h.count,
                                          h.base_offset, h.base_ts, h.max_ts, h.last_offset_delta,
                                          h.attributes & TIMESTAMP_TYPE_BIT, start_offset, LLONG_MIN, -1, into);
            if (took < 0)
                goto done;
            if (took == 0)
                break;
        }
        else if (h.last >= start_offset) {
            long long lo = start_offset > h.base_offset ? start_offset - h.base_offset : 0;
            PyObject *took = records_into(type, p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE),
                                          (Py_ssize_t)h.count, h.last_offset_delta, h.base_offset, h.base_ts,
                                          h.max_ts, h.attributes & TIMESTAMP_TYPE_BIT, (Py_ssize_t)lo, -1, into);
            if (took == NULL)
                goto done;
            int declined = took == Py_None;
            Py_DECREF(took);
            if (declined)
                break;
        }
        expected = h.last + 1;
        position += (Py_ssize_t)h.size;
    }
    result = Py_BuildValue("nL", position, expected);
done:
    if (result == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "batches_records: position must be >= 0 and record_type a tuple type");
    PyBuffer_Release(&view);
    return result;
}

/* ---- a batch table's header walk (batch_table.walk_batch_table) ---- */

/*
 * walk_headers(window, at, position, end, stop_at, expected, max_entries)
 *   -> (taken, position, expected, last_offsets, positions, max_timestamps)
 *
 * walk_batch_table's loop over the headers of one window of a .log: from window[at] (file position
 * `position`) on, each header that lies whole in the window, whose batch starts before `end` and
 * `stop_at`, is plain (plain_header_ok, max_batch_bytes: `end` - its position, as the Python walk
 * checks it) and has base offset `expected` is tabled, up to `max_entries`. It stops before the
 * first header that is anything else (a Kafka batch, a damaged header, one beyond the window): the
 * Python loop then decides about exactly that header. Returns how many it took, the position and
 * expected base offset after them, and the three columns as native int64 bytes (array('q')).
 */
static PyObject *
walk_headers(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t at, max_entries;
    long long position, end, stop_at, expected;
    if (!PyArg_ParseTuple(args, "y*nLLLLn", &view, &at, &position, &end, &stop_at, &expected, &max_entries))
        return NULL;
    PyObject *result = NULL, *columns[3] = {NULL, NULL, NULL};
    int64_t *out = NULL; /* the three columns, `room` entries each */
    Py_ssize_t taken = 0, room = 0;
    if (at < 0 || at > view.len || max_entries < 0) {
        PyErr_SetString(PyExc_ValueError, "walk_headers: at must lie in the window and max_entries be >= 0");
        goto done;
    }
    /* At most one entry per HEADER_SIZE bytes of the window: the columns' size, trimmed at the end. */
    room = (view.len - at) / HEADER_SIZE;
    if (room > max_entries)
        room = max_entries;
    out = PyMem_Malloc(3 * (size_t)(room > 0 ? room : 1) * sizeof(int64_t));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *buf = view.buf;
    while (taken < room && position < end && position < stop_at && view.len - at >= HEADER_SIZE) {
        Header h;
        parse_header(buf + at, &h);
        if (!plain_header_ok(&h, end - position) || h.base_offset != expected || h.last == LLONG_MAX)
            break;
        out[taken] = h.last;
        out[room + taken] = position;
        out[2 * room + taken] = h.max_ts;
        taken++;
        expected = h.last + 1;
        position += h.size;
        if (h.size > view.len - at)
            break; /* the next header lies beyond this window */
        at += (Py_ssize_t)h.size;
    }
    for (int i = 0; i < 3; i++) {
        columns[i] = PyBytes_FromStringAndSize((const char *)(out + i * room), taken * (Py_ssize_t)sizeof(int64_t));
        if (columns[i] == NULL)
            goto done;
    }
    result = Py_BuildValue("nLLOOO", taken, position, expected, columns[0], columns[1], columns[2]);
done:
    PyMem_Free(out);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(columns[i]);
    PyBuffer_Release(&view);
    return result;
}

/*
 * whole_batches_length(buf, first_size) -> int | None
 *
 * batch.whole_batches_length: the length of the longest prefix of `buf` made of whole batches whose
 * offsets follow on, the first one `first_size` bytes long. None when first_size is below a
 * header's size, or an offset does not fit an int64 (the Python function then decides).
 */
static PyObject *
whole_batches_length(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t first_size;
    if (!PyArg_ParseTuple(args, "y*n", &view, &first_size))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t size = view.len, length = first_size <= size ? first_size : 0;
    PyObject *result = NULL;
    if (first_size < HEADER_SIZE) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (length > 0) {
        long long expected;
        if (!add_int64((long long)be(buf, 8), (int32_t)be(buf + 23, 4), &expected) ||
            !add_int64(expected, 1, &expected)) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        while (length + HEADER_SIZE <= size) {
            const unsigned char *p = buf + length;
            long long base_offset = (long long)be(p, 8);
            long long batch_length = (int32_t)be(p + 8, 4);
            if (base_offset != expected || batch_length <= 0 || length + LOG_OVERHEAD + batch_length > size)
                break;
            if (!add_int64(base_offset, (int32_t)be(p + 23, 4), &expected) || !add_int64(expected, 1, &expected)) {
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            length += LOG_OVERHEAD + (Py_ssize_t)batch_length;
        }
    }
    result = PyLong_FromSsize_t(length);
done:
    PyBuffer_Release(&view);
    return result;
}

/*
 * The search of find_timestamp on the body bytes [body, body + body_len): 1 with *found the index
 * of the first entry at or after `lo` whose timestamp is >= target (with LogAppendTime: `lo`), -1
 * when none is, and *at that timestamp (-1 when none); 0 for anything it does not take (the
 * offset and timestamp columns are checked as batch.find_timestamp checks them; the rest of the
 * body is not read).
 */
static int
search_timestamps(const unsigned char *body, Py_ssize_t body_len, Py_ssize_t count, long long last_offset_delta,
                  long long base_ts, long long max_ts, int log_append, Py_ssize_t lo, long long target,
                  Py_ssize_t *found, long long *at)
{
    *found = -1;
    *at = -1;
    if (body_len < 0 || count < 1 || lo < 0 || lo >= count || last_offset_delta != count - 1 || base_ts < 0 ||
        max_ts < base_ts)
        return 0;
    Cursor c = {body, body + body_len};
    Py_ssize_t n;
    if (!take_array_header(&c, &n) || n != 5 || !take_nil(&c))
        return 0;
    Cursor column = c;
    if (!take_timestamps(&c, count, base_ts, max_ts, log_append, 0, 0, NULL))
        return 0; /* checked whole; now search it */
    if (log_append) {
        *found = lo; /* every record carries the batch's max timestamp */
        *at = max_ts;
    }
    else if (take_nil(&column)) {
        if (base_ts >= target) {
            *found = lo;
            *at = base_ts;
        }
    }
    else {
        take_array_header(&column, &n);
        for (Py_ssize_t i = 0; i < count; i++) {
            long long d;
            take_int(&column, &d); /* succeeded above; base_ts + d lies in [0, max_ts] */
            if (i >= lo && base_ts + d >= target) {
                *found = i;
                *at = base_ts + d;
                break;
            }
        }
    }
    return 1;
}

/*
 * find_timestamp(buf, body_start, body_end, count, last_offset_delta, base_ts, max_ts, log_append,
 *                lo, target) -> (index, timestamp) | None
 *
 * In a dense batch body (nil offset column), the index of the first entry at or after `lo`
 * whose timestamp is >= target (with LogAppendTime: `lo`) and that timestamp, (-1, -1) when
 * no entry qualifies; the offset and
 * timestamp columns are checked as batch.find_timestamp checks them (the rest of the body is
 * not read). None for anything else, so the Python path decides.
 */
static PyObject *
find_timestamp(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t body_start, body_end, count, lo;
    long long last_offset_delta, base_ts, max_ts, target;
    int log_append;
    if (!PyArg_ParseTuple(args, "y*nnnLLLpnL", &view, &body_start, &body_end, &count, &last_offset_delta, &base_ts,
                          &max_ts, &log_append, &lo, &target))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t found;
    long long at;
    if (body_start < 0 || body_start > body_end || body_end > view.len ||
        !search_timestamps((const unsigned char *)view.buf + body_start, body_end - body_start, count,
                           last_offset_delta, base_ts, max_ts, log_append, lo, target, &found, &at)) {
        result = Py_None;
        Py_INCREF(result);
    }
    else
        result = Py_BuildValue("nL", found, at);
    PyBuffer_Release(&view);
    return result;
}

/*
 * record_at_time(record_type, crc32c, buf, base_offset, last_offset, target, start_offset) -> Record | None
 *
 * A time lookup in the one batch a batch table placed, in one call (batch.record_at_time_py is
 * its Python twin): `buf` must be exactly that batch, whose base offset is `base_offset`, last
 * offset `last_offset` and length len(buf) by the table. Its header is checked by plain_header_ok
 * (a plain seglog batch, no control batch) and against those three, its CRC-32C
 * verified (crc32c_of), then the first record at or after start_offset whose timestamp is >=
 * target is found (find_timestamp's search) and that one Record built (decode_records' checks of
 * the whole body). None when no record qualifies or anything is not exactly so: the caller's
 * slower path then decides (and says what is wrong).
 */
static PyObject *
record_at_time(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    PyObject *crc32c;
    Py_buffer view;
    long long want_base, want_last, target, start_offset;
    if (!PyArg_ParseTuple(args, "O!Oy*LLLL", &PyType_Type, &type, &crc32c, &view, &want_base, &want_last, &target,
                          &start_offset))
        return NULL;
    PyObject *result = NULL, *built = NULL;
    const unsigned char *p = view.buf;
    Header h;
    if (view.len < HEADER_SIZE || !PyType_IsSubtype(type, &PyTuple_Type))
        goto fallback;
    parse_header(p, &h);
    if (!plain_header_ok(&h, view.len) || h.size != view.len || h.base_offset != want_base || h.last != want_last ||
        start_offset > h.last)
        goto fallback;
    unsigned long long value;
    if (!crc32c_of(crc32c, p + CRC_START, (Py_ssize_t)(h.size - CRC_START), &value))
        goto error;
    if (value != h.crc)
        goto fallback; /* the slower path reports the mismatch */
    int log_append = h.attributes & TIMESTAMP_TYPE_BIT;
    Py_ssize_t lo = (Py_ssize_t)(start_offset > h.base_offset ? start_offset - h.base_offset : 0), found;
    long long at;
    if (!search_timestamps(p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE), (Py_ssize_t)h.count,
                           h.last_offset_delta, h.base_ts, h.max_ts, log_append, lo, target, &found, &at) ||
        found < 0)
        goto fallback;
    /* max_bytes 0: exactly one Record, the one found (the whole body checked, as a read checks it) */
    built = records_of_body(type, p + HEADER_SIZE, (Py_ssize_t)(h.size - HEADER_SIZE), (Py_ssize_t)h.count,
                            h.last_offset_delta, h.base_offset, h.base_ts, h.max_ts, log_append, found, 0);
    if (built == NULL)
        goto error;
    if (built == Py_None || PyList_GET_SIZE(built) < 1)
        goto fallback;
    result = PyList_GET_ITEM(built, 0);
    Py_INCREF(result);
    goto done;

fallback:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(built);
    PyBuffer_Release(&view);
    return result;
}

/*
 * pread_spans(fd, spans, file_size) -> list[bytes] | None
 *
 * The bytes at each (position, size) of the tuple `spans`, read from `fd` from the page cache alone
 * (preadv2 with RWF_NOWAIT, straight into the bytes objects returned), each span clamped to
 * `file_size` (nothing left: b""): the list when every span was read whole, else None -- bytes not
 * cached, a short read, a failed read, a negative span, or no preadv2 on this platform -- and the
 * caller's Python loop (fileio.SegmentFile.read_cached_spans, its twin) reads them again and decides
 * (it raises what a failed read raises). It blocks on nothing, so it keeps the GIL.
 */
static PyObject *
pread_spans(PyObject *self, PyObject *args)
{
    int fd;
    PyObject *spans;
    long long file_size;
    if (!PyArg_ParseTuple(args, "iO!L", &fd, &PyTuple_Type, &spans, &file_size))
        return NULL;
#if defined(__linux__) && defined(RWF_NOWAIT)
    Py_ssize_t n = PyTuple_GET_SIZE(spans);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *span = PyTuple_GET_ITEM(spans, i);
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 2)
            goto decline;
        long long position = PyLong_AsLongLong(PyTuple_GET_ITEM(span, 0));
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(span, 1));
        if (PyErr_Occurred() || position < 0 || size < 0)
            goto decline;
        long long available = position < file_size ? file_size - position : 0; /* no overflow: 0 <= position */
        if (size > available)
            size = available > 0 ? available : 0;
        if (size > PY_SSIZE_T_MAX)
            goto decline;
        PyObject *piece = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
        if (piece == NULL)
            goto error;
        PyList_SET_ITEM(out, i, piece); /* owned by the list: released with it */
        if (size > 0) {
            struct iovec iov = {PyBytes_AS_STRING(piece), (size_t)size};
            if (preadv2(fd, &iov, 1, (off_t)position, RWF_NOWAIT) != (ssize_t)size)
                goto decline; /* errno is the Python loop's to read again and report */
        }
    }
    return out;
decline:
    PyErr_Clear();
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    Py_DECREF(out);
    return NULL;
#else
    (void)fd;
    (void)file_size;
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"encode_body", encode_body, METH_VARARGS, "The msgpack body of a batch of valid records, or None."},
    {"encode_small_batch", encode_small_batch, METH_VARARGS, "A whole small batch (header with CRC, body) as a bytearray, or None."},
    {"body_plan", body_plan, METH_VARARGS, "encode_body's checking pass: a Plan whose write() makes the body, or None."},
    {"range_ok", range_ok, METH_VARARGS, "Whether records lo..hi-1 of checked-length columns pass FORMAT.md 2.3 rule 8."},
    {"arrow_batch", arrow_batch, METH_VARARGS, "The records of a dense batch body as Arrow column buffers, or None."},
    {"build_records", build_records, METH_VARARGS, "The Records of entries lo..hi-1 of checked columns."},
    {"decode_records", decode_records, METH_VARARGS, "The Records of a dense batch body from entry lo on, or None."},
    {"batch_records", batch_records, METH_VARARGS, "The Records a read of the (checked, CRC-verified) batch returns."},
    {"find_timestamp", find_timestamp, METH_VARARGS, "The first entry >= lo of a dense body at or after a timestamp."},
    {"record_at_time", record_at_time, METH_VARARGS, "A time lookup's one Record of a batch placed by a batch table, or None."},
    {"pread_spans", pread_spans, METH_VARARGS, "Spans of a file read from the page cache alone, or None."},
    {"batches_records", batches_records, METH_VARARGS, "decode_batches' loop over the plain valid batches of a buffer."},
    {"use_native_crc32c", use_native_crc32c, METH_VARARGS, "Compute batches_records' CRCs with google-crc32c's C function."},
    {"native_crc32c_in_use", native_crc32c_in_use, METH_NOARGS, "Whether batches_records uses google-crc32c's C function."},
    {"walk_headers", walk_headers, METH_VARARGS, "walk_batch_table's loop over the plain headers of one window."},
    {"whole_batches_length", whole_batches_length, METH_VARARGS, "The bytes of whole, following-on batches at a buffer's start."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "seglog.segments._speedups",
    "The per-record loops of the batch codec in C; segments.batch is the reference and falls back to Python.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PlanType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(&PlanType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
