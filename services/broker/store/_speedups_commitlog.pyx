# cython: language_level=3
"""Compiled record layout and packing for CommitLog.put_uniform_items (SEND_BATCH_MESSAGE).

Swapped in at the end of commit_log.py (``_layout_uniform``, ``_write_uniform``); the
pure-Python functions there (kept as ``_py_<name>``) stay the fallback and the oracle, and the
bytes written are the same. Only the common case runs here: a list of tuples, exact ``bytes``
bodies, exact ``str`` properties, exact ``int`` numbers that fit their Java types, IPv4/IPv6
addresses of 4/16 bytes, an mmap or bytearray to write into. Anything else is handed to the Python code before a byte is written (both
passes are free of side effects until the final copy), so odd input gives exactly its values and
exceptions. The record header is written big-endian straight into the mapped segment, in
MessageExtEncoder's field order, after every length was checked against the buffer.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

from mmap import mmap as _mmap
from zlib import crc32 as _crc32

from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.common.message import MessageConst, properties_to_string, string_to_properties
from orbitmq.common.message_codec import MAX_PROPERTIES_LENGTH, MESSAGE_MAGIC_CODE, tags_hash_code

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL

cdef object _TAGS = MessageConst.TAGS
cdef object _KEYS = MessageConst.KEYS
cdef object _UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
cdef Py_ssize_t _MAX_PROPS = MAX_PROPERTIES_LENGTH
cdef uint32_t _MAGIC = MESSAGE_MAGIC_CODE
cdef int64_t INT_MIN = -0x80000000
cdef int64_t INT_MAX = 0x7FFFFFFF
cdef char* _HEX = b"0123456789ABCDEF"


cdef object _python():
    """commit_log.py, imported when first needed (it imports this module at its end)."""
    from orbitmq.broker.store import commit_log
    return commit_log


cdef inline bint _as_int64(object v, int64_t* out):
    """An exact int fitting a Java long into ``out``; False for anything else."""
    cdef int overflow = 0
    cdef long long x
    if type(v) is not int:
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        return False
    out[0] = x
    return True


cdef inline bint _as_int32(object v, int64_t* out):
    """An exact int fitting a Java int into ``out``; False for anything else."""
    return _as_int64(v, out) and INT_MIN <= out[0] <= INT_MAX


cdef inline unsigned char* _put32(unsigned char* p, uint32_t v) noexcept:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v
    return p + 4


cdef inline unsigned char* _put64(unsigned char* p, uint64_t v) noexcept:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)
    return p + 8


def _layout_uniform(items, Py_ssize_t fixed, Py_ssize_t max_body, Py_ssize_t max_record, Py_ssize_t max_fit):
    """commit_log._layout_uniform: check and lay out each item; nothing is written."""
    cdef list recs = []
    cdef Py_ssize_t batch_bytes = 0, lp, lb, total
    cdef int64_t flag_v = 0
    cdef const char* props_p
    cdef object tail, item, flag, body, props, props_s, crc
    cdef unsigned char* t
    if type(items) is not list:
        return _python()._py_layout_uniform(items, fixed, max_body, max_record, max_fit)
    for item in <list>items:
        if type(item) is not tuple or len(<tuple>item) != 4:
            return _python()._py_layout_uniform(items, fixed, max_body, max_record, max_fit)
        flag, body, props, props_s = <tuple>item
        if not _as_int32(flag, &flag_v):
            if type(flag) is int:
                return None  # out of an int's range, as the Python code says
            return _python()._py_layout_uniform(items, fixed, max_body, max_record, max_fit)
        if type(body) is not bytes:
            return _python()._py_layout_uniform(items, fixed, max_body, max_record, max_fit)
        if props_s is None:
            props_s = properties_to_string(props) if props else ""
            props = None
        if type(props_s) is not str:
            return _python()._py_layout_uniform(items, fixed, max_body, max_record, max_fit)
        # Strict UTF-8 as str.encode (UnicodeEncodeError for surrogates, same message).
        props_p = PyUnicode_AsUTF8AndSize(props_s, &lp)
        lb = PyBytes_GET_SIZE(body)
        total = fixed + lb + lp
        if lp > _MAX_PROPS or lb > max_body or total > max_record or total > max_fit:
            return None
        crc = _crc32(body) & 0x7FFFFFFF
        tail = PyBytes_FromStringAndSize(NULL, lp + 2)
        t = <unsigned char*>PyBytes_AS_STRING(tail)
        t[0] = <unsigned char>(lp >> 8)
        t[1] = <unsigned char>lp
        memcpy(t + 2, props_p, lp)
        recs.append((total, crc, flag, body, tail, props_s, props))
        batch_bytes += total
    return recs, batch_bytes


cdef Py_ssize_t _header_size(Py_ssize_t born_len, Py_ssize_t store_len):
    """Bytes before the body for the two host forms (message_codec.header_struct)."""
    return 20 + 8 + 8 + 4 + 8 + born_len + 4 + 8 + store_len + 4 + 4 + 8 + 4


def _write_uniform(mm, start, base, recs, hs, topic, queue_id, sflag, born_ts, born_addr, born_port, now,
                   store_addr, store_port, reconsume, prepared, topic_field, prefix, qoff, counted, handoff):
    """commit_log._write_uniform: the records written into ``mm``, their ids, offsets and
    DispatchRequests; nothing is written when anything raises."""
    cdef int64_t v_start = 0, v_base = 0, v_queue_id = 0, v_sflag = 0, v_born_ts = 0, v_born_port = 0, v_now = 0
    cdef int64_t v_store_port = 0
    cdef int64_t v_reconsume = 0, v_prepared = 0, v_qoff = 0, v_total = 0, v_crc = 0, v_flag = 0, phy, q, pos
    cdef Py_ssize_t n, i, k, hsize, born_len, store_len, tf_len, id_len, lb, lt, prefix_len
    cdef Py_ssize_t batch_bytes = 0
    cdef bint is_counted = counted
    cdef bint is_handoff = handoff
    cdef tuple rec
    cdef object body, tail, props, props_s, tags, keys, uniq, last_tags, tags_code, phy_o, qoff_o, ids_b, prefix_b
    cdef list offsets = [], requests = []
    cdef Py_buffer view
    cdef unsigned char* out
    cdef unsigned char* p
    cdef char* idp
    cdef const char* born_p
    cdef const char* store_p
    cdef const char* tf_p
    args = (mm, start, base, recs, hs, topic, queue_id, sflag, born_ts, born_addr, born_port, now, store_addr,
            store_port, reconsume, prepared, topic_field, prefix, qoff, counted, handoff)
    # Everything checked before anything is built or written: otherwise the Python code answers.
    if (type(mm) is not _mmap and type(mm) is not bytearray  # slice assignment copies bytes as is
            or type(recs) is not list or type(born_addr) is not bytes or type(store_addr) is not bytes
            or type(topic_field) is not bytes or type(prefix) is not str or not (<str>prefix).isascii()
            or not _as_int64(start, &v_start) or not _as_int64(base, &v_base)
            or not _as_int32(queue_id, &v_queue_id) or not _as_int32(sflag, &v_sflag)
            or not _as_int64(born_ts, &v_born_ts) or not _as_int32(born_port, &v_born_port)
            or not _as_int64(now, &v_now) or not _as_int32(store_port, &v_store_port)
            or not _as_int32(reconsume, &v_reconsume) or not _as_int64(prepared, &v_prepared)
            or not _as_int64(qoff, &v_qoff) or v_start < 0 or v_base < 0 or v_base > (1LL << 62)
            or v_qoff < 0 or v_qoff > (1LL << 62)):
        return _python()._py_write_uniform(*args)
    born_len = PyBytes_GET_SIZE(born_addr)
    store_len = PyBytes_GET_SIZE(store_addr)
    if born_len != 4 and born_len != 16 or store_len != 4 and store_len != 16:
        return _python()._py_write_uniform(*args)
    if hs.format != (">iIiiiqqiq" + ("16si" if born_len == 16 else "4si") + "q"
                     + ("16si" if store_len == 16 else "4si") + "iqi"):
        return _python()._py_write_uniform(*args)
    hsize = _header_size(born_len, store_len)
    tf_len = PyBytes_GET_SIZE(topic_field)
    n = len(<list>recs)
    for i in range(n):
        rec = <tuple>(<list>recs)[i] if type((<list>recs)[i]) is tuple else None
        if rec is None or len(rec) != 7:
            return _python()._py_write_uniform(*args)
        body = rec[3]
        tail = rec[4]
        props = rec[6]
        if (type(body) is not bytes or type(tail) is not bytes
                or not _as_int32(rec[0], &v_total) or not _as_int32(rec[1], &v_crc)
                or not _as_int32(rec[2], &v_flag)
                or v_total != hsize + PyBytes_GET_SIZE(body) + tf_len + PyBytes_GET_SIZE(tail)
                or is_handoff and not (type(props) is dict or props is None and type(rec[5]) is str)):
            return _python()._py_write_uniform(*args)
        batch_bytes += v_total
    if batch_bytes > (1LL << 62) - v_start:
        return _python()._py_write_uniform(*args)
    try:
        PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE)
    except (TypeError, ValueError, BufferError):
        return _python()._py_write_uniform(*args)
    if view.len < v_start + batch_bytes:
        PyBuffer_Release(&view)
        return _python()._py_write_uniform(*args)
    try:
        # Pass A: the Python objects (ids, offsets, DispatchRequests); may raise, writes nothing.
        prefix_b = (<str>prefix).encode("ascii")
        prefix_len = PyBytes_GET_SIZE(prefix_b)
        id_len = prefix_len + 16
        ids_b = PyBytes_FromStringAndSize(NULL, n * (id_len + 1) - 1 if n else 0)
        idp = PyBytes_AS_STRING(ids_b)
        last_tags = None
        tags_code = 0
        pos = v_start
        q = v_qoff
        for i in range(n):
            rec = <tuple>(<list>recs)[i]
            _as_int32(rec[0], &v_total)
            phy = v_base + pos
            if i:
                idp[0] = b','
                idp += 1
            memcpy(idp, PyBytes_AS_STRING(prefix_b), prefix_len)
            for k in range(16):
                idp[prefix_len + k] = _HEX[(phy >> (60 - 4 * k)) & 0xF]
            idp += id_len
            phy_o = PyLong_FromLongLong(phy)
            qoff_o = PyLong_FromLongLong(q)
            offsets.append((phy_o, qoff_o))
            if is_handoff:
                props = rec[6]
                if props is None:
                    props_s = rec[5]
                    props = string_to_properties(props_s) if props_s else {}
                if type(props) is dict:
                    tags = (<dict>props).get(_TAGS)
                    keys = (<dict>props).get(_KEYS, "")
                    uniq = (<dict>props).get(_UNIQ_KEY)
                else:
                    tags = props.get(_TAGS)
                    keys = props.get(_KEYS, "")
                    uniq = props.get(_UNIQ_KEY)
                if tags != last_tags:  # a batch's messages mostly share their tag
                    last_tags = tags
                    tags_code = tags_hash_code(tags) if tags else 0
                requests.append(DispatchRequest(topic, queue_id, phy_o, rec[0], tags_code, now, qoff_o, keys, uniq,
                                                sflag, prepared, props))
            pos += v_total
            if is_counted:
                q += 1
        msg_ids = PyUnicode_DecodeASCII(PyBytes_AS_STRING(ids_b), PyBytes_GET_SIZE(ids_b), NULL)
        # Pass B: the bytes, each record MessageExtEncoder's layout; every length checked above.
        born_p = PyBytes_AS_STRING(born_addr)
        store_p = PyBytes_AS_STRING(store_addr)
        tf_p = PyBytes_AS_STRING(topic_field)
        out = <unsigned char*>view.buf
        pos = v_start
        q = v_qoff
        for i in range(n):
            rec = <tuple>(<list>recs)[i]
            _as_int32(rec[0], &v_total)
            _as_int32(rec[1], &v_crc)
            _as_int32(rec[2], &v_flag)
            body = rec[3]
            tail = rec[4]
            lb = PyBytes_GET_SIZE(body)
            lt = PyBytes_GET_SIZE(tail)
            p = out + pos
            p = _put32(p, <uint32_t>v_total)
            p = _put32(p, _MAGIC)
            p = _put32(p, <uint32_t>v_crc)
            p = _put32(p, <uint32_t>v_queue_id)
            p = _put32(p, <uint32_t>v_flag)
            p = _put64(p, <uint64_t>q)
            p = _put64(p, <uint64_t>(v_base + pos))
            p = _put32(p, <uint32_t>v_sflag)
            p = _put64(p, <uint64_t>v_born_ts)
            memcpy(p, born_p, born_len)
            p = _put32(p + born_len, <uint32_t>v_born_port)
            p = _put64(p, <uint64_t>v_now)
            memcpy(p, store_p, store_len)
            p = _put32(p + store_len, <uint32_t>v_store_port)
            p = _put32(p, <uint32_t>v_reconsume)
            p = _put64(p, <uint64_t>v_prepared)
            p = _put32(p, <uint32_t>lb)
            memcpy(p, PyBytes_AS_STRING(body), lb)
            p += lb
            memcpy(p, tf_p, tf_len)
            p += tf_len
            memcpy(p, PyBytes_AS_STRING(tail), lt)
            pos += v_total
            if is_counted:
                q += 1
    finally:
        PyBuffer_Release(&view)
    return pos, PyLong_FromLongLong(q), msg_ids, offsets, requests
