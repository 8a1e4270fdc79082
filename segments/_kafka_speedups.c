/*
 * seglog.segments._kafka_speedups: the record walk of Kafka's RecordBatch v2 in C.
 *
 * seglog.segments.kafka_batch is the reference (docs/FORMAT.md §2.5); this module only answers
 * "all good" faster for the check a produced batch gets before it is stored (produced_records_ok),
 * and builds the Records of a stored batch a read returns (stored_records, the reader's walk of
 * _kafka_records.h, which _speedups.c's fetch loop shares); it returns None for anything else, after
 * which the Python walk decides and says what is wrong. Kept apart from _speedups.c (seglog's own
 * format): a second format, a second small module.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <limits.h>

#include "_kafka_records.h"

/* A header key: valid UTF-8 without NUL (what a seglog header key may be). */
static int
key_ok(const unsigned char *p, int64_t length)
{
    for (int64_t i = 0; i < length; i++) {
        if (p[i] == 0)
            return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)length, "strict");
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(text);
    return 1;
}

/*
 * produced_records_ok(records, count, base_timestamp) -> (max_delta, missing_timestamps) | None
 *
 * The writer's walk of an uncompressed records section (kafka_batch._walk_records with
 * produced=True, build=False): `count` records filling `records` exactly, each with offset delta
 * equal to its index, key and value lengths >= -1 that fit, headers with a non-null UTF-8 key
 * without NUL and a non-null value, and a timestamp base_timestamp + delta that is >= 0 or -1
 * (none: missing_timestamps). None when anything is not exactly so.
 */
static PyObject *
produced_records_ok(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long count, base_ts;
    if (!PyArg_ParseTuple(args, "y*LL", &view, &count, &base_ts))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    int64_t max_delta = 0;
    int missing = 0, ok = count >= 0 && count <= end / 7;
    for (long long index = 0; ok && index < count; index++) {
        int64_t length, ts_delta, offset_delta, size, headers, ts;
        Py_ssize_t start;
        if (!kr_read_varint(buf, &pos, end, 5, &length) || length < 6 || length > end - pos) {
            ok = 0;
            break;
        }
        Py_ssize_t stop = pos + (Py_ssize_t)length;
        pos += 1; /* record attributes */
        if (!kr_read_varint(buf, &pos, stop, 10, &ts_delta) || !kr_read_varint(buf, &pos, stop, 5, &offset_delta) ||
            offset_delta != index || !kr_read_field(buf, &pos, stop, &start, &size) ||
            !kr_read_field(buf, &pos, stop, &start, &size) || !kr_read_varint(buf, &pos, stop, 5, &headers) ||
            headers < 0 || headers > (stop - pos) / 2) {
            ok = 0;
            break;
        }
        for (int64_t h = 0; ok && h < headers; h++) {
            int64_t key_length, value_length;
            Py_ssize_t key_start = 0, value_start;
            if (!kr_read_field(buf, &pos, stop, &key_start, &key_length) || key_length < 0 ||
                !kr_read_field(buf, &pos, stop, &value_start, &value_length) || value_length < 0 ||
                !key_ok(buf + key_start, key_length))
                ok = 0;
        }
        if (!ok || pos != stop || __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
            ok = 0;
            break;
        }
        if (ts < 0) {
            if (ts != -1) {
                ok = 0;
                break;
            }
            missing = 1;
        }
        if (ts_delta > max_delta)
            max_delta = ts_delta;
    }
    PyBuffer_Release(&view);
    if (!ok || pos != end)
        Py_RETURN_NONE;
    return Py_BuildValue("(LO)", (long long)max_delta, missing ? Py_True : Py_False);
}

/*
 * stored_records(record_type, section, count, base_offset, base_ts, max_ts, last_offset_delta,
 *                log_append, start_offset, max_bytes[, min_timestamp]) -> list[Record] | None
 *
 * kafka_records_into (segments/_kafka_records.h) into a new list: the Records of one stored batch's
 * uncompressed records section (from the first at or after start_offset whose timestamp is >=
 * min_timestamp, when given: a time lookup), or None when anything is not exactly as the reader's
 * rules say.
 */
static PyObject *
stored_records(PyObject *self, PyObject *args)
{
    PyTypeObject *type;
    Py_buffer view;
    long long count, base_offset, base_ts, max_ts, last_offset_delta, start_offset, max_bytes, min_ts = LLONG_MIN;
    int log_append;
    if (!PyArg_ParseTuple(args, "O!y*LLLLLpLL|L", &PyType_Type, &type, &view, &count, &base_offset, &base_ts,
                          &max_ts, &last_offset_delta, &log_append, &start_offset, &max_bytes, &min_ts))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out != NULL) {
        switch (kafka_records_into(type, view.buf, view.len, count, base_offset, base_ts, max_ts, last_offset_delta,
                                   log_append, start_offset, min_ts, max_bytes, out)) {
        case -1:
            Py_CLEAR(out);
            break;
        case 0:
            Py_DECREF(out);
            out = Py_None;
            Py_INCREF(out);
            break;
        }
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"produced_records_ok", produced_records_ok, METH_VARARGS,
     "The writer's check of a produced batch's records: (max timestamp delta, missing timestamps) or None."},
    {"stored_records", stored_records, METH_VARARGS,
     "The Records a read of a stored batch's uncompressed records section returns, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kafka_speedups", "Kafka RecordBatch v2 record walk in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__kafka_speedups(void)
{
    return PyModule_Create(&module);
}
