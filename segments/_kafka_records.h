/*
 * segments/_kafka_records.h: the reader's walk of a Kafka RecordBatch v2 records section, in C.
 *
 * Shared by the two C modules: _kafka_speedups.c (stored_records: one batch, kafka_batch.decode_records)
 * and _speedups.c (batches_records: the fetch loop, which takes plain uncompressed Kafka batches among
 * seglog's). segments/kafka_batch.py is the reference (docs/FORMAT.md §2.5): everything here takes only
 * the valid case and says "refused" for anything else, so that the Python walk says what is wrong.
 * Every function is static: each module has its own copy.
 */
#ifndef SEGLOG_KAFKA_RECORDS_H
#define SEGLOG_KAFKA_RECORDS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KAFKA_MIN_RECORD_BYTES 7

/* A zigzag varint of at most `max_bytes` bytes at *pos (< end). 0 when it is cut short, too long
 * or (for a varlong) wider than 64 bits: the Python walk reports those. */
static int
kr_read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return 0;
        unsigned char byte = buf[p++];
        if (i == 9 && byte > 1)
            return 0;
        raw |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p;
            return 1;
        }
    }
    return 0;
}

/* A length-prefixed field (key, value, header key or value) from *pos: 1 and its start/length
 * (length -1: null), 0 when it does not fit before `stop`. */
static int
kr_read_field(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t stop, Py_ssize_t *start, int64_t *length)
{
    if (!kr_read_varint(buf, pos, stop, 5, length))
        return 0;
    if (*length == -1)
        return 1;
    if (*length < 0 || *length > stop - *pos)
        return 0;
    *start = *pos;
    *pos += (Py_ssize_t)*length;
    return 1;
}

/* A record's headers from *pos: a tuple of (str, bytes) pairs ending exactly at `stop`; NULL with no
 * exception when anything breaks the reader's rules (the Python walk reports it), NULL with an
 * exception when memory runs out. */
static PyObject *
kr_take_headers(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t stop, int64_t count)
{
    if (count < 0 || count > (stop - *pos) / 2)
        return NULL;
    PyObject *pairs = PyTuple_New((Py_ssize_t)count);
    if (pairs == NULL)
        return NULL;
    for (int64_t h = 0; h < count; h++) {
        int64_t key_length, value_length;
        Py_ssize_t key_start = 0, value_start = 0;
        if (!kr_read_field(buf, pos, stop, &key_start, &key_length) || key_length < 0 ||
            !kr_read_field(buf, pos, stop, &value_start, &value_length) || value_length < 0 ||
            memchr(buf + key_start, 0, (size_t)key_length) != NULL)
            goto refused;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)buf + key_start, (Py_ssize_t)key_length, "strict");
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                goto error;
            PyErr_Clear();
            goto refused;
        }
        PyObject *value = PyBytes_FromStringAndSize((const char *)buf + value_start, (Py_ssize_t)value_length);
        PyObject *pair = value == NULL ? NULL : PyTuple_Pack(2, name, value);
        Py_DECREF(name);
        Py_XDECREF(value);
        if (pair == NULL)
            goto error;
        PyTuple_SET_ITEM(pairs, (Py_ssize_t)h, pair);
    }
    if (*pos != stop)
        goto refused;
    return pairs;
refused:
    Py_DECREF(pairs);
    return NULL;
error:
    Py_DECREF(pairs);
    return NULL;
}

static PyObject *
kr_bytes_or_none(const unsigned char *buf, Py_ssize_t start, int64_t length)
{
    if (length < 0)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)buf + start, (Py_ssize_t)length);
}

/*
 * A Record (a 5-tuple whose headers, item 3, are set already) given its value, key, timestamp and
 * offset, which it takes over; then untracked by the cyclic GC: it holds only bytes, None, ints and
 * tuples of (str, bytes) pairs, which cannot lead back to it. 0 when one of them is NULL (memory ran
 * out: the tuple's dealloc skips NULL items).
 */
static inline int
fill_record(PyObject *record, PyObject *value, PyObject *key, PyObject *timestamp, PyObject *offset)
{
    PyTuple_SET_ITEM(record, 0, value);
    PyTuple_SET_ITEM(record, 1, key);
    PyTuple_SET_ITEM(record, 2, timestamp);
    PyTuple_SET_ITEM(record, 4, offset);
    if (value == NULL || key == NULL || timestamp == NULL || offset == NULL)
        return 0;
    PyObject_GC_UnTrack(record);
    return 1;
}

/*
 * kafka_records_into(type, section, len, count, base_offset, base_ts, max_ts, last_offset_delta,
 *                    log_append, start_offset, min_ts, max_bytes, into) -> 1 | 0 | -1
 *
 * kafka_batch.decode_records of a stored, non-control batch whose header and CRC were checked, over
 * its uncompressed records section: every reader rule of _walk_records (produced=False) and
 * _walk_stored (count records filling the section exactly; offset deltas strictly increasing from
 * >= 0, the last at most last_offset_delta; key and value lengths >= -1 that fit; headers with a
 * non-null UTF-8 key without NUL and a non-null value, ending at the record's end; every timestamp
 * >= 0; without log_append the largest timestamp equal to max_ts), then the Records from the first
 * at or after start_offset whose timestamp is >= min_ts (LLONG_MIN: any; a time lookup's search) on,
 * up to max_bytes of keys and values (-1: all), every timestamp max_ts under log_append, appended to
 * the list `into`. 1 when so; 0 (refused) when anything is not exactly so,
 * -1 with an exception (memory): in both cases `into` is left as it was.
 */
static int
kafka_records_into(PyTypeObject *type, const unsigned char *buf, Py_ssize_t end, long long count,
                   long long base_offset, long long base_ts, long long max_ts, long long last_offset_delta,
                   int log_append, long long start_offset, long long min_ts, long long max_bytes, PyObject *into)
{
    Py_ssize_t pos = 0, at = PyList_GET_SIZE(into);
    int64_t previous = -1, max_delta = 0, total = 0;
    int full = 0;    /* max_bytes reached: the records after it are checked, not built */
    int started = 0; /* a record reached start_offset and min_ts: it and those after it are built */
    int outcome = 0;
    if (!PyType_IsSubtype(type, &PyTuple_Type) || count < 0 || count > end / KAFKA_MIN_RECORD_BYTES ||
        base_offset < 0)
        goto refused;
    for (long long index = 0; index < count; index++) {
        int64_t length, ts_delta, offset_delta, key_length, value_length, header_count, ts, offset;
        Py_ssize_t key_start = 0, value_start = 0;
        if (!kr_read_varint(buf, &pos, end, 5, &length) || length < KAFKA_MIN_RECORD_BYTES - 1 || length > end - pos)
            goto refused;
        Py_ssize_t stop = pos + (Py_ssize_t)length;
        pos += 1; /* record attributes: unused by Kafka's v2 format */
        if (!kr_read_varint(buf, &pos, stop, 10, &ts_delta) || !kr_read_varint(buf, &pos, stop, 5, &offset_delta) ||
            offset_delta <= previous || !kr_read_field(buf, &pos, stop, &key_start, &key_length) ||
            !kr_read_field(buf, &pos, stop, &value_start, &value_length) ||
            !kr_read_varint(buf, &pos, stop, 5, &header_count) ||
            __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts) || ts < 0 ||
            __builtin_add_overflow((int64_t)base_offset, offset_delta, &offset))
            goto refused;
        previous = offset_delta;
        if (ts_delta > max_delta)
            max_delta = ts_delta;
        PyObject *headers;
        if (header_count == 0) {
            if (pos != stop)
                goto refused;
            headers = PyTuple_New(0);
            if (headers == NULL)
                goto error;
        }
        else {
            headers = kr_take_headers(buf, &pos, stop, header_count);
            if (headers == NULL) {
                if (PyErr_Occurred())
                    goto error;
                goto refused;
            }
        }
        if (!started)
            started = offset >= start_offset && (log_append ? max_ts : (long long)ts) >= min_ts;
        if (full || !started) {
            Py_DECREF(headers);
            continue;
        }
        PyObject *record = type->tp_alloc(type, 5);
        if (record == NULL) {
            Py_DECREF(headers);
            goto error;
        }
        PyTuple_SET_ITEM(record, 3, headers);
        int appended = PyList_Append(into, record);
        Py_DECREF(record); /* owned by the list from here: cleaned up with it */
        if (appended < 0)
            goto error;
        if (!fill_record(record, kr_bytes_or_none(buf, value_start, value_length),
                         kr_bytes_or_none(buf, key_start, key_length),
                         PyLong_FromLongLong(log_append ? max_ts : (long long)ts), PyLong_FromLongLong(offset)))
            goto error;
        if (max_bytes >= 0) {
            total += (key_length > 0 ? key_length : 0) + (value_length > 0 ? value_length : 0);
            if (total >= max_bytes)
                full = 1;
        }
    }
    if (pos != end || previous > last_offset_delta || (!log_append && base_ts + max_delta != max_ts))
        goto refused;
    return 1;
error:
    outcome = -1;
refused:
    if (PyList_GET_SIZE(into) > at) { /* `into` as it was: a caller's list never holds a partial batch */
        PyObject *type_, *value, *traceback;
        PyErr_Fetch(&type_, &value, &traceback);
        if (PyList_SetSlice(into, at, PyList_GET_SIZE(into), NULL) < 0)
            outcome = -1; /* (cannot fail when shrinking) */
        PyErr_Restore(type_, value, traceback);
    }
    return outcome;
}

#endif
