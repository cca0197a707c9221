# cython: language_level=3
"""Compiled body of SEND_BATCH_MESSAGE for the proxy's send path (batch.encode_batch).

Swapped in at the end of batch.py; the pure-Python function there (``_py_encode_batch``) stays
the fallback and the oracle. The sizes are summed first and every message written into one
bytes object (no per-message struct packing, no list of parts, no join). Only a list or tuple
of exact ``bytes`` bodies and exact ``str`` properties whose sizes fit the format take this
path: anything else goes to the Python function, which gives its values or raises its errors.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_CheckExact
from libc.stdint cimport uint32_t
from libc.string cimport memcpy

from zlib import crc32 as _crc32

DEF FIXED = 22  # totalSize, magic, bodyCRC, flag, bodyLength (int32 each) + propertiesLength (int16)
DEF INT32_MAX = 0x7FFFFFFF
DEF INT16_MAX = 0x7FFF


cdef inline char* put_int32(char* out, uint32_t value) noexcept nogil:
    out[0] = <char>(value >> 24)
    out[1] = <char>(value >> 16)
    out[2] = <char>(value >> 8)
    out[3] = <char>value
    return out + 4


cdef struct Item:
    const char* body
    Py_ssize_t body_size
    const char* props
    Py_ssize_t props_size


def encode_batch(bodies, properties):
    """batch.encode_batch: MessageDecoder.encodeMessages of flag-0 messages, properties as strings."""
    cdef Py_ssize_t count, i, total = 0, size
    cdef Item* items
    cdef const char* props
    cdef char* out
    cdef uint32_t crc
    cdef bytes wire
    if not ((type(bodies) is list or type(bodies) is tuple) and (type(properties) is list or type(properties) is tuple)
            and len(bodies) == len(properties)):
        return _python_encode_batch(bodies, properties)
    # Own references: zlib.crc32 releases the GIL on big bodies, and the pointers below must stay valid.
    bodies = tuple(bodies)
    properties = tuple(properties)
    count = len(bodies)
    if count == 0:
        return b""
    items = <Item*>PyMem_Malloc(count * sizeof(Item))
    if items == NULL:
        raise MemoryError()
    try:
        # Pass 1: check and size every message.
        for i in range(count):
            body = bodies[i]
            text = properties[i]
            if not (PyBytes_CheckExact(body) and PyUnicode_CheckExact(text)):
                return _python_encode_batch(bodies, properties)
            try:
                props = PyUnicode_AsUTF8AndSize(text, &size)
            except UnicodeEncodeError:
                return _python_encode_batch(bodies, properties)  # raises the same error, in order
            items[i].body = PyBytes_AS_STRING(body)
            items[i].body_size = PyBytes_GET_SIZE(body)
            items[i].props = props
            items[i].props_size = size
            if size > INT16_MAX or items[i].body_size > INT32_MAX - FIXED - size:
                return _python_encode_batch(bodies, properties)  # struct.error where Python gives it
            total += FIXED + items[i].body_size + size
        wire = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(wire)
        # Pass 2: write them (crc32 is zlib's, called per body like the Python code does).
        for i in range(count):
            crc = <uint32_t>(_crc32(bodies[i]) & INT32_MAX)
            out = put_int32(out, <uint32_t>(FIXED + items[i].body_size + items[i].props_size))
            out = put_int32(out, 0)  # magic: the broker does not check it in a batch
            out = put_int32(out, crc)
            out = put_int32(out, 0)  # flag
            out = put_int32(out, <uint32_t>items[i].body_size)
            memcpy(out, items[i].body, items[i].body_size)
            out += items[i].body_size
            out[0] = <char>(items[i].props_size >> 8)
            out[1] = <char>items[i].props_size
            memcpy(out + 2, items[i].props, items[i].props_size)
            out += 2 + items[i].props_size
        if out != PyBytes_AS_STRING(wire) + total:
            raise AssertionError("batch size miscounted")
        return wire
    finally:
        PyMem_Free(items)


cdef object _python = None


cdef object _python_encode_batch(bodies, properties):
    """batch._py_encode_batch, imported on first use: batch.py imports this module at its end."""
    global _python
    if _python is None:
        from orbitmq.client.batch import _py_encode_batch
        _python = _py_encode_batch
    return _python(bodies, properties)
