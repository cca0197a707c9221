# cython: language_level=3
"""Compiled decode of a SEND_BATCH_MESSAGE body (batch_codec.decode_batch's well-formed case).

Swapped in at the end of batch_codec.py; the pure-Python ``decode_batch`` (kept as
``_py_decode_batch``) stays the fallback and the oracle. Each message's header fields are read
big-endian straight from the bytes after its bounds were checked; a body that is malformed in any
way (or empty) goes to batch_codec._decode_checked, which names the first problem exactly as the
Python code does.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, uint16_t, uint32_t


cdef inline int32_t _int32(const unsigned char* p) noexcept:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int16_t _int16(const unsigned char* p) noexcept:
    return <int16_t>((<uint16_t>p[0] << 8) | <uint16_t>p[1])


cdef object _decode_checked(data):
    """batch_codec._decode_checked, imported when first needed (batch_codec imports this module)."""
    from orbitmq.broker.processors import batch_codec
    return batch_codec._decode_checked(data)


def decode_batch(data):
    """batch_codec.decode_batch: the (flag, body, properties) of each message as tuples."""
    cdef Py_ssize_t size, pos = 0, end, cursor
    cdef int32_t total, body_len
    cdef const unsigned char* buf
    cdef list items = []
    if not isinstance(data, bytes):
        data = bytes(data)  # as the Python code: one copy, then slices of it
    size = PyBytes_GET_SIZE(data)
    buf = <const unsigned char*>PyBytes_AS_STRING(data)
    while pos < size:
        if size - pos < 20:  # the Python code's struct.error on a short header
            return _decode_checked(data)
        total = _int32(buf + pos)
        body_len = _int32(buf + pos + 16)
        end = pos + total
        cursor = pos + 20 + body_len
        if (total < 22 or end > size or body_len < 0 or cursor + 2 > end
                or _int16(buf + cursor) != end - cursor - 2):
            return _decode_checked(data)
        try:
            properties = PyUnicode_DecodeUTF8(<const char*>buf + cursor + 2, end - cursor - 2, NULL)
        except UnicodeDecodeError:
            return _decode_checked(data)
        items.append((_int32(buf + pos + 12),
                      PyBytes_FromStringAndSize(<const char*>buf + pos + 20, body_len),
                      properties))
        pos = end
    if not items:
        return _decode_checked(data)  # raises BatchDecodeError("batch body holds no message")
    return items
