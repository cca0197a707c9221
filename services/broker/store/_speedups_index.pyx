# cython: language_level=3
"""Compiled IndexFile writer for the reput dispatcher: `topic#key` hashes and item/slot writes.

Swapped in at the end of index_file.py (``put_hashes``) and index_service.py
(``build_index_many``); the pure-Python functions there (kept as ``_py_<name>``) stay the
fallback and the oracle, and the file bytes are the same. Only the common case runs here: exact
``str`` keys without surrogate code points, exact ``int`` numbers that fit the item/header fields,
list/tuple hashes. Anything else is handed to the Python code before a byte is written, so odd
input gives exactly its values, side effects and exceptions.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.unicode cimport PyUnicode_1BYTE_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

cdef extern from "Python.h":
    int PyUnicode_READY(object o) except -1

cdef enum:
    INDEX_HEADER_SIZE = 40
    HASH_SLOT_SIZE = 4
    INDEX_SIZE = 20
    INVALID_INDEX = 0
    TRANSACTION_MASK = 0xC  # sysflag.TRANSACTION_ROLLBACK_TYPE, also the mask
    KEY_SEPARATOR = 0x20  # MessageConst.KEY_SEPARATOR, " "
    TOPIC_KEY_SEPARATOR = 0x23  # build_key's "#"

cdef int32_t INT_MAX = 0x7FFFFFFF
cdef int32_t INT_MIN = -0x80000000
# Timestamps and offsets beyond this go to the Python code (no int64 overflow in differences).
cdef int64_t WIDE_LIMIT = 1LL << 62

# Returned by _native_key_hashes when the Python code must answer.
cdef object _FALLBACK = object()

# orbitmq.broker.store.index_file / index_service, imported at first use: they import this module.
cdef object _index_file = None
cdef object _index_service = None


cdef int _bind() except -1:
    global _index_file, _index_service
    if _index_service is None:
        from orbitmq.broker.store import index_file, index_service
        _index_file = index_file
        _index_service = index_service
    return 0


cdef bint _writers_replaced():
    """Whether index_file's struct writers were swapped (tests simulate a crash mid-record that
    way): then the Python put_hashes writes, so the replacement runs exactly as it would there."""
    m = _index_file
    return not (m._item_pack_into == m._ITEM.pack_into and m._slot_pack_into == m._SLOT.pack_into
                and m._slot_unpack_from == m._SLOT.unpack_from and m._header_pack_into == m._HEADER.pack_into)


# ---- big-endian fields and int checks (callers check every position against the buffer first) --

include "_speedups_fields.pxi"


# ---- String.hashCode of `topic#key` --------------------------------------------------------------

cdef int _fold(str s, Py_ssize_t start, Py_ssize_t end, uint32_t* h) except -1:
    """Fold the UTF-16 code units of s[start:end] into the hash ``h`` (31 * h + unit, mod 2**32).

    Returns 1, leaving ``h`` alone, when the range holds a surrogate code point: Python's UTF-16
    encoding (which the pure-Python hash uses) raises for those, so the caller falls back to it.
    """
    cdef int kind = PyUnicode_KIND(s)
    cdef void* data = PyUnicode_DATA(s)
    cdef const unsigned char* latin1
    cdef uint32_t acc = h[0]
    cdef uint32_t c  # not Py_UCS4: Cython treats that as a one-char string in arithmetic
    cdef Py_ssize_t i
    if kind == PyUnicode_1BYTE_KIND:
        latin1 = <const unsigned char*>data
        for i in range(start, end):
            acc = acc * 31u + latin1[i]
    else:
        for i in range(start, end):
            c = <uint32_t>PyUnicode_READ(kind, data, i)
            if c >= 0x10000:  # an astral char is two UTF-16 code units in Java
                c -= 0x10000
                acc = acc * 31u + (0xD800u + (c >> 10))
                acc = acc * 31u + (0xDC00u + (c & 0x3FFu))
            elif 0xD800 <= c <= 0xDFFF:
                return 1
            else:
                acc = acc * 31u + c
    h[0] = acc
    return 0


cdef inline uint32_t _abs_hash(uint32_t h) noexcept nogil:
    """index_file.abs_java_hash: Math.abs of the signed int, Integer.MIN_VALUE -> 0."""
    return h if h < 0x80000000u else (0u - h) & 0x7FFFFFFFu


def index_key_hash(topic, key):
    """index_key_hash(topic + "#" + key) for str arguments without surrogates; None otherwise."""
    cdef uint32_t h = 0
    if type(topic) is not str or type(key) is not str:
        return None
    PyUnicode_READY(topic)
    PyUnicode_READY(key)
    if _fold(topic, 0, PyUnicode_GET_LENGTH(topic), &h):
        return None
    h = h * 31u + TOPIC_KEY_SEPARATOR
    if _fold(key, 0, PyUnicode_GET_LENGTH(key), &h):
        return None
    return _abs_hash(h)


cdef object _native_key_hashes(req):
    """IndexService._key_hashes(req) with the stock IndexKeyHasher; _FALLBACK for the odd cases.

    Same order of checks as the Python code; the fallback is decided before anything is built.
    """
    cdef uint32_t prefix = 0
    cdef uint32_t h
    cdef Py_ssize_t n, i, start
    cdef str keys
    cdef int kind
    cdef void* data
    if not req.success or (req.sys_flag & TRANSACTION_MASK) == TRANSACTION_MASK:
        return None
    uniq_key = req.uniq_key
    keys_str = req.keys
    if not keys_str and not uniq_key:
        return None if uniq_key is None else []
    topic = req.topic
    if type(topic) is not str or (keys_str and type(keys_str) is not str) or \
            (uniq_key is not None and type(uniq_key) is not str):
        return _FALLBACK
    PyUnicode_READY(topic)
    if _fold(topic, 0, PyUnicode_GET_LENGTH(topic), &prefix):
        return _FALLBACK
    prefix = prefix * 31u + TOPIC_KEY_SEPARATOR
    key_hashes = []
    if uniq_key:
        h = prefix
        PyUnicode_READY(uniq_key)
        if _fold(uniq_key, 0, PyUnicode_GET_LENGTH(uniq_key), &h):
            return _FALLBACK
        key_hashes.append(_abs_hash(h))
    if keys_str:
        # keys_str.split(KEY_SEPARATOR), empty parts skipped, hashed in place.
        keys = keys_str
        PyUnicode_READY(keys)
        n = PyUnicode_GET_LENGTH(keys)
        kind = PyUnicode_KIND(keys)
        data = PyUnicode_DATA(keys)
        i = 0
        while i < n:
            while i < n and PyUnicode_READ(kind, data, i) == KEY_SEPARATOR:
                i += 1
            if i >= n:
                break
            start = i
            while i < n and PyUnicode_READ(kind, data, i) != KEY_SEPARATOR:
                i += 1
            h = prefix
            if _fold(keys, start, i, &h):
                return _FALLBACK
            key_hashes.append(_abs_hash(h))
        if uniq_key is None and not key_hashes:
            return None
    return key_hashes


# ---- IndexFile.put_hashes ------------------------------------------------------------------------

cdef Py_ssize_t _put_native(f, object key_hashes, Py_ssize_t first, object phy_offset, object store_timestamp,
                            bint write_header) except -2:
    """index_file.put_hashes(f, key_hashes[first:], ...) for the common case; -1 (nothing
    touched) when the Python code must do it: a value that does not fit its field, odd types,
    or a file whose geometry does not match its buffer."""
    cdef int64_t index_count = 0, index_num = 0, slot_num = 0, items_pos = 0
    cdef int64_t begin_ts = 0, begin_phy = 0, slot_count = 0
    cdef int64_t phy = 0, ts = 0, time_diff = 0, diff_ms, kh = 0, slot
    cdef Py_ssize_t n, i, new_slots = 0
    cdef int32_t slot_value
    cdef bint first_item
    cdef Py_buffer view
    cdef unsigned char* buf
    cdef int64_t item_pos, abs_slot_pos
    cdef int32_t hashes_stack[16]
    cdef int32_t* hashes
    cdef object hashes_holder = None
    if type(key_hashes) is not list and type(key_hashes) is not tuple:
        return -1
    if not (_as_i64(f.index_count, 0, INT_MAX, &index_count)
            and _as_i64(f.index_num, 2, INT_MAX, &index_num)
            and _as_i64(f.hash_slot_num, 1, INT_MAX, &slot_num)
            and _as_i64(f._items_pos, 0, WIDE_LIMIT, &items_pos)):
        return -1
    n = len(key_hashes) - first
    if index_num - index_count <= 0 or n <= 0:
        return 0
    if index_num - index_count < n:
        n = <Py_ssize_t>(index_num - index_count)
    if not (_as_i64(phy_offset, -WIDE_LIMIT, WIDE_LIMIT, &phy)
            and _as_i64(store_timestamp, -WIDE_LIMIT, WIDE_LIMIT, &ts)
            and _as_i64(f.begin_timestamp, -WIDE_LIMIT, WIDE_LIMIT, &begin_ts)
            and _as_i64(f.begin_phy_offset, -WIDE_LIMIT, WIDE_LIMIT, &begin_phy)
            and _as_i64(f.hash_slot_count, INT_MIN, INT_MAX - n, &slot_count)):
        return -1
    if items_pos != INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE:
        return -1
    # The hashes, checked before anything is written.
    if n <= 16:
        hashes = hashes_stack
    else:
        hashes_holder = bytearray(n * sizeof(int32_t))
        hashes = <int32_t*><char*>hashes_holder
    for i in range(n):
        if not _as_i64(key_hashes[first + i], INT_MIN, INT_MAX, &kh):
            return -1
        hashes[i] = <int32_t>kh
    first_item = index_count <= 1
    if first_item:
        # The first item defines beginTimestamp, so the record's diffs are 0 (see put_hashes).
        time_diff = 0
        begin_phy = phy
        begin_ts = ts
    elif begin_ts <= 0:
        time_diff = 0
    else:
        # Java's truncating (diff / 1000) clamped to [0, Integer.MAX_VALUE].
        diff_ms = ts - begin_ts
        if diff_ms < 1000:
            time_diff = 0
        else:
            time_diff = diff_ms // 1000
            if time_diff > INT_MAX:
                time_diff = INT_MAX
    PyObject_GetBuffer(f._mm, &view, PyBUF_WRITABLE)
    try:
        if view.len < items_pos + (index_count + n) * INDEX_SIZE:
            return -1
        buf = <unsigned char*>view.buf
        item_pos = items_pos + index_count * INDEX_SIZE
        for i in range(n):
            slot = hashes[i] % slot_num
            if slot < 0:  # Python's modulo: never negative for a positive divisor
                slot += slot_num
            abs_slot_pos = INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE
            slot_value = _get32(buf + abs_slot_pos)
            if slot_value <= INVALID_INDEX or slot_value > index_count:
                slot_value = INVALID_INDEX
                new_slots += 1
            # item: keyHash:i phyOffset:q timeDiff:i prevIndex:i, then the slot points at it
            _put32(buf + item_pos, <uint32_t>hashes[i])
            _put64(buf + item_pos + 4, <uint64_t>phy)
            _put32(buf + item_pos + 12, <uint32_t>time_diff)
            _put32(buf + item_pos + 16, <uint32_t>slot_value)
            _put32(buf + abs_slot_pos, <uint32_t>index_count)
            index_count += 1
            item_pos += INDEX_SIZE
        slot_count += new_slots
        if write_header:
            _put64(buf, <uint64_t>begin_ts)
            _put64(buf + 8, <uint64_t>ts)
            _put64(buf + 16, <uint64_t>begin_phy)
            _put64(buf + 24, <uint64_t>phy)
            _put32(buf + 32, <uint32_t>slot_count)
            _put32(buf + 36, <uint32_t>index_count)
    finally:
        PyBuffer_Release(&view)
    if first_item:
        f.begin_phy_offset = phy_offset
        f.begin_timestamp = store_timestamp
    if new_slots:
        f.hash_slot_count = slot_count
    f.index_count = index_count
    f.end_phy_offset = phy_offset
    f.end_timestamp = store_timestamp
    return n


cdef Py_ssize_t _put(f, object key_hashes, Py_ssize_t first, object phy_offset, object store_timestamp,
                     bint write_header, bint native) except -1:
    """put_hashes(f, key_hashes[first:], ...); ``native`` False: the Python code writes."""
    cdef Py_ssize_t n = -1
    if native:
        n = _put_native(f, key_hashes, first, phy_offset, store_timestamp, write_header)
    if n >= 0:
        return n
    if first:
        key_hashes = key_hashes[first:]
    return _index_file._py_put_hashes(f, key_hashes, phy_offset, store_timestamp, write_header)


def put_hashes(f, key_hashes, phy_offset, store_timestamp, write_header=True):
    """index_file.put_hashes, compiled."""
    cdef Py_ssize_t n = -1
    _bind()
    if not _writers_replaced():
        n = _put_native(f, key_hashes, 0, phy_offset, store_timestamp, write_header)
    if n >= 0:
        return n
    return _index_file._py_put_hashes(f, key_hashes, phy_offset, store_timestamp, write_header)


# ---- IndexService.build_index_many ---------------------------------------------------------------

def build_index_many(service, reqs, failed=None):
    """index_service.build_index_many, compiled: the same run, the same headers, the same logs.

    The keys are hashed here unless the service's hasher (or _key_hashes) was replaced, as tests
    do to inject failures: then service._key_hashes answers, as in the Python run.
    """
    cdef Py_ssize_t done, n
    cdef bint native, native_put
    _bind()
    log = _index_service.log  # the compiled run logs exactly what the Python run logs
    native_put = not _writers_replaced()
    hasher = service._hasher
    native = (type(hasher) is _index_file.IndexKeyHasher and "key_hash" not in getattr(hasher, "__dict__", ())
              and type(service)._key_hashes is _index_service.IndexService._key_hashes
              and "_key_hashes" not in getattr(service, "__dict__", ()))
    dirty = None  # the file whose header is owed
    lock = service._lock
    lock.acquire()
    try:
        for req in reqs:
            try:
                if native:
                    key_hashes = _native_key_hashes(req)
                    if key_hashes is _FALLBACK:
                        key_hashes = service._key_hashes(req)
                else:
                    key_hashes = service._key_hashes(req)
                if key_hashes is None:
                    continue
                offset = req.commit_log_offset
                files = service._files
                index_file = files[-1] if files else None
                if index_file is None or index_file.index_count >= index_file.index_num:
                    if dirty is not None:
                        dirty.write_header()
                        dirty = None
                    index_file = service._get_and_create_last_file()
                if offset < index_file.end_phy_offset:
                    continue
                ts = req.store_timestamp
                done = _put(index_file, key_hashes, 0, offset, ts, False, native_put)
                if done:
                    dirty = index_file
                while done < len(key_hashes):
                    log.info("index file %s is full, rolling to a new one", index_file.file_name)
                    if dirty is not None:
                        dirty.write_header()
                        dirty = None
                    index_file = service._get_and_create_last_file()
                    n = _put(index_file, key_hashes, done, offset, ts, False, native_put)
                    if n:
                        dirty = index_file
                    done += n
            except OSError:
                log.exception("cannot create index file under %s; marking index file error", service.store_path)
                if service.running_flags is not None:
                    service.running_flags.make_index_file_error()
            except Exception:
                if failed is None:
                    raise
                failed(req)
    finally:
        try:
            if dirty is not None:
                dirty.write_header()
        finally:
            lock.release()
