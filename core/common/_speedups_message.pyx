# cython: language_level=3, binding=False
"""Compiled RocketMQ message properties codec and Java String.hashCode.

Swapped in at the end of message.py, java_hash.py and message_codec.py under the same names;
the pure-Python functions there (kept as ``_py_<name>``) stay the fallback and the oracle. Only
exact ``str`` / ``dict`` / ``bytes`` / ``bytearray`` arguments take the compiled path: anything
else is handed to the Python function, so odd inputs give exactly its values and exceptions.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_CheckExact, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_CheckExact, PyDict_Next, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport (
    PyUnicode_1BYTE_KIND,
    PyUnicode_CheckExact,
    PyUnicode_CopyCharacters,
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_New,
    PyUnicode_READ,
    PyUnicode_Substring,
    PyUnicode_WRITE,
)
from libc.stdint cimport int32_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy

cdef extern from "Python.h":
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object o)

# MessageDecoder.NAME_VALUE_SEPARATOR / PROPERTY_SEPARATOR.
cdef Py_UCS4 NAME_VALUE_SEPARATOR = 1
cdef Py_UCS4 PROPERTY_SEPARATOR = 2


# ---- properties string <-> dict ---------------------------------------------------------------

cdef inline Py_ssize_t _find(int kind, const void *data, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end):
    """Index of ``ch`` in [start, end) of a str's data, or ``end`` when absent."""
    cdef const char *p
    cdef Py_ssize_t i
    if kind == PyUnicode_1BYTE_KIND:
        p = <const char *>memchr(<const char *>data + start, <int>ch, <size_t>(end - start))
        return end if p == NULL else p - <const char *>data
    for i in range(start, end):
        if PyUnicode_READ(kind, <void *>data, i) == ch:
            return i
    return end


# Property names repeat in every message (UNIQ_KEY, TAGS, KEYS, WAIT, user names ...): a small
# direct-mapped cache of name strings, keyed by a few of their bytes, saves allocating and
# hashing each name again (a cached str keeps its hash). Only 1-byte-kind names are cached.
cdef enum:
    _NAME_SLOTS = 128  # a power of two
    _NAME_MAX = 48
cdef list _name_cache = [None] * _NAME_SLOTS


cdef inline str _name_1byte(str s, const unsigned char *data, Py_ssize_t start, Py_ssize_t end):
    """s[start:end] of a 1-byte-kind ``s``, from the cache when an equal name is there."""
    cdef Py_ssize_t n = end - start
    cdef const unsigned char *p = data + start
    cdef Py_ssize_t slot
    cdef object cached
    cdef str name
    if n > _NAME_MAX:
        return PyUnicode_Substring(s, start, end)
    slot = (n * 7 + p[0] + 31 * p[n >> 1] + 961 * p[n - 1]) & (_NAME_SLOTS - 1)
    cached = _name_cache[slot]
    if (cached is not None and PyUnicode_GET_LENGTH(cached) == n and PyUnicode_KIND(cached) == PyUnicode_1BYTE_KIND
            and memcmp(PyUnicode_DATA(cached), p, <size_t>n) == 0):
        return <str>cached
    name = PyUnicode_Substring(s, start, end)
    _name_cache[slot] = name
    return name


cdef Py_ssize_t _parse_into(str s, dict result) except -1:
    """Fill ``result`` as string_to_properties does; returns how many PROPERTY_SEPARATORs ``s`` has.

    Same rules as ``s.split("\\x02")`` then ``partition("\\x01")``: empty segments and segments
    without a name (no separator, or one at the start) are skipped; a later name overwrites the
    value but keeps the first one's place, as dict assignment does.
    """
    cdef int kind = PyUnicode_KIND(s)
    cdef const void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s)
    cdef Py_ssize_t start = 0, end, sep, separators = 0
    cdef str name
    while start <= n:
        end = _find(kind, data, PROPERTY_SEPARATOR, start, n)
        if end < n:
            separators += 1
        if end > start:
            sep = _find(kind, data, NAME_VALUE_SEPARATOR, start, end)
            if start < sep < end:
                if kind == PyUnicode_1BYTE_KIND:
                    name = _name_1byte(s, <const unsigned char *>data, start, sep)
                else:
                    name = PyUnicode_Substring(s, start, sep)
                PyDict_SetItem(result, name, PyUnicode_Substring(s, sep + 1, end))
        start = end + 1
    return separators


cpdef dict string_to_properties(s):
    """Decode a properties string; tolerant of a missing final separator and empty items."""
    cdef dict result
    if PyUnicode_CheckExact(s):
        result = {}
        if PyUnicode_GET_LENGTH(s):
            _parse_into(<str>s, result)
        return result
    if s is None:
        return {}
    from orbitmq.common import message
    return message._py_string_to_properties(s)


cpdef tuple parse_properties_exact(s):
    """(string_to_properties(s), whether properties_to_string of that dict gives ``s`` back)."""
    cdef dict result
    cdef Py_ssize_t n, separators
    if PyUnicode_CheckExact(s):
        result = {}
        n = PyUnicode_GET_LENGTH(s)
        if n == 0:
            return result, True
        separators = _parse_into(<str>s, result)
        return result, (PyUnicode_READ(PyUnicode_KIND(s), PyUnicode_DATA(s), n - 1) == PROPERTY_SEPARATOR
                        and len(result) == separators)
    if s is None:
        return {}, True
    from orbitmq.common import message
    return message._py_parse_properties_exact(s)


cpdef dict bytes_to_properties(data):
    """Decode properties read from a CommitLog record or a Remoting header (UTF-8)."""
    cdef str text
    cdef dict result = {}
    if PyBytes_CheckExact(data):
        text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), NULL)
    elif PyByteArray_CheckExact(data):
        text = PyUnicode_DecodeUTF8(PyByteArray_AS_STRING(data), PyByteArray_GET_SIZE(data), NULL)
    else:
        from orbitmq.common import message
        return message._py_bytes_to_properties(data)
    if PyUnicode_GET_LENGTH(text):
        _parse_into(text, result)
    return result


cdef inline int _copy_into(str out, int kind, void *data, Py_ssize_t at, str part, Py_ssize_t n) except -1:
    """out[at:at + n] = part (the caller checked the bounds); a plain memcpy when the kinds agree."""
    if PyUnicode_KIND(part) == kind:
        memcpy(<char *>data + at * kind, PyUnicode_DATA(part), <size_t>(n * kind))
    else:
        PyUnicode_CopyCharacters(out, at, part, 0, n)
    return 0


cpdef str properties_to_string(props):
    """Encode properties as RocketMQ stores them; None values are skipped like upstream.

    Sized in a first pass and written in a second. Only a plain dict whose names and values are
    plain str (or None) is done here: nothing in it can run Python code between the passes.
    """
    cdef Py_ssize_t pos = 0, total = 0, at, k, v
    cdef PyObject *name
    cdef PyObject *value
    cdef Py_UCS4 maxchar = 0, m
    cdef str out
    cdef int kind
    cdef void *data
    if not PyDict_CheckExact(props):
        from orbitmq.common import message
        return message._py_properties_to_string(props)
    while PyDict_Next(props, &pos, &name, &value):
        if <object>value is None:
            continue
        if not PyUnicode_CheckExact(<object>name) or not PyUnicode_CheckExact(<object>value):
            from orbitmq.common import message
            return message._py_properties_to_string(props)
        total += PyUnicode_GET_LENGTH(<object>name) + PyUnicode_GET_LENGTH(<object>value) + 2
        m = PyUnicode_MAX_CHAR_VALUE(<object>name)
        if m > maxchar:
            maxchar = m
        m = PyUnicode_MAX_CHAR_VALUE(<object>value)
        if m > maxchar:
            maxchar = m
    out = PyUnicode_New(total, maxchar)
    kind = PyUnicode_KIND(out)
    data = PyUnicode_DATA(out)
    pos = 0
    at = 0
    while PyDict_Next(props, &pos, &name, &value):
        if <object>value is None:
            continue
        k = PyUnicode_GET_LENGTH(<object>name)
        v = PyUnicode_GET_LENGTH(<object>value)
        if at + k + v + 2 > total:  # cannot happen: the dict did not change since it was sized
            raise RuntimeError("properties changed while being encoded")
        _copy_into(out, kind, data, at, <object>name, k)
        at += k
        PyUnicode_WRITE(kind, data, at, NAME_VALUE_SEPARATOR)
        at += 1
        _copy_into(out, kind, data, at, <object>value, v)
        at += v
        PyUnicode_WRITE(kind, data, at, PROPERTY_SEPARATOR)
        at += 1
    if at != total:
        raise RuntimeError("properties changed while being encoded")
    return out


# ---- Java String.hashCode ---------------------------------------------------------------------

cdef uint32_t _hash_u32(str s) except? 0xFFFFFFFF:
    """hashCode over the UTF-16 code units of ``s``, mod 2**32.

    An astral character is hashed as its surrogate pair; a lone surrogate (which UTF-16 cannot
    encode) raises the UnicodeEncodeError the Python version's ``s.encode("utf-16-be")`` does.
    """
    cdef int kind = PyUnicode_KIND(s)
    cdef const void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(s)
    cdef const unsigned char *ucs1
    cdef uint32_t h = 0, c
    if kind == PyUnicode_1BYTE_KIND:
        # Four units per step (h*31**4 + a*31**3 + b*31**2 + c*31 + d): a shorter multiply chain.
        ucs1 = <const unsigned char *>data
        i = 0
        while i + 4 <= n:
            h = (h * 923521u + ucs1[i] * 29791u + ucs1[i + 1] * 961u + ucs1[i + 2] * 31u + ucs1[i + 3])
            i += 4
        while i < n:
            h = h * 31u + ucs1[i]
            i += 1
        return h
    for i in range(n):
        c = <uint32_t>PyUnicode_READ(kind, <void *>data, i)
        if 0xD800 <= c <= 0xDFFF:
            s.encode("utf-16-be")  # raises for the lone surrogate
            raise AssertionError("unreachable: a lone surrogate encoded")
        if c > 0xFFFF:
            c -= 0x10000
            h = h * 31u + (0xD800u + (c >> 10))
            h = h * 31u + (0xDC00u + (c & 0x3FFu))
        else:
            h = h * 31u + c
    return h


cpdef object java_string_hash_u32(s):
    """String.hashCode of ``s`` as an unsigned 32-bit int (the same bits as the signed one)."""
    if PyUnicode_CheckExact(s):
        return _hash_u32(<str>s)
    from orbitmq.common import java_hash
    return java_hash._py_java_string_hash_u32(s)


cpdef object java_string_hash(s):
    """String.hashCode of ``s`` as a signed 32-bit int."""
    if PyUnicode_CheckExact(s):
        return <int32_t>_hash_u32(<str>s)
    from orbitmq.common import java_hash
    return java_hash._py_java_string_hash(s)


cpdef object tags_hash_code(tag):
    """Java String.hashCode of the TAGS property (signed 32-bit), the ConsumeQueue tag code."""
    if PyUnicode_CheckExact(tag):
        return <int32_t>_hash_u32(<str>tag)
    from orbitmq.common import message_codec
    return message_codec._py_tags_hash_code(tag)
