# cython: language_level=3
"""Compiled ConsumeQueue dispatch for the reput service: the 20-byte entry of each stored record.

Swapped in at the end of consume_queue.py (``put_message_position_info``) and message_store.py
(``dispatch_consume_queue``); the pure-Python functions there (kept as ``_py_<name>``) stay the
fallback and the oracle, and the queue bytes are the same. Only the common case runs here (the
entry goes right after the last one inside the open segment, exact ints that fit the entry):
everything else is handed to the Python code before a byte is written, so it keeps deciding
blank fills, new segments, repeated dispatch and errors.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t, uint32_t, uint64_t

cdef enum:
    CQ_STORE_UNIT_SIZE = 20
    TRANSACTION_MASK = 0xC  # sysflag: NOT 0x0, PREPARED 0x4, COMMIT 0x8, ROLLBACK 0xC
    TRANSACTION_COMMIT_TYPE = 0x8

cdef int64_t INT_MAX = 0x7FFFFFFF
cdef int64_t INT_MIN = -0x80000000
# Offsets beyond this go to the Python code: no int64 overflow in offset + size or index * 20.
cdef int64_t WIDE_LIMIT = 1LL << 58

# consume_queue / mapped_file, imported at first use: consume_queue.py imports this module.
cdef object _consume_queue = None
cdef object _ConsumeQueue = None
cdef object _MappedFile = None


cdef int _bind() except -1:
    global _consume_queue, _ConsumeQueue, _MappedFile
    if _consume_queue is None:
        from orbitmq.broker.store import consume_queue, mapped_file
        _MappedFile = mapped_file.MappedFile
        _ConsumeQueue = consume_queue.ConsumeQueue
        _consume_queue = consume_queue
    return 0


include "_speedups_fields.pxi"


cdef int _put_native(cq, object offset, object size, object tags_code, object cq_offset) except -2:
    """ConsumeQueue.put_message_position_info's common case; 1 done, -1 (nothing touched) when
    the Python code must decide."""
    cdef int64_t off = 0, sz = 0, tags = 0, idx = 0, max_phy = 0, pos = 0, seg_size = 0, from_off = 0
    cdef int64_t file_size = 0
    cdef Py_buffer view
    cdef unsigned char* p
    if not (_as_i64(offset, -WIDE_LIMIT, WIDE_LIMIT, &off) and _as_i64(size, INT_MIN, INT_MAX, &sz)
            and _as_i64(cq.max_physic_offset, -WIDE_LIMIT, WIDE_LIMIT, &max_phy)):
        return -1
    if off + sz <= max_phy:
        return 1  # a record already indexed (re-dispatch) is ignored
    if not (_as_i64(tags_code, INT64_MIN, INT64_MAX, &tags)
            and _as_i64(cq_offset, -WIDE_LIMIT, WIDE_LIMIT, &idx)
            and _as_i64(cq.mapped_file_size, 0, WIDE_LIMIT, &seg_size)):
        return -1
    files = cq.mapped_file_queue.mapped_files
    if type(files) is not list or not files:
        return -1
    mf = (<list>files)[-1]
    if type(mf) is not _MappedFile:
        return -1
    if not (_as_i64(mf.wrote_position, 1, WIDE_LIMIT, &pos) and _as_i64(mf.file_from_offset, 0, WIDE_LIMIT, &from_off)
            and _as_i64(mf.file_size, 0, WIDE_LIMIT, &file_size)):
        return -1
    # The entry goes right after the last one, inside the open segment (not at its start,
    # where the first-segment blank fill may apply), and MappedFile.append has room for it.
    if not (pos <= seg_size - CQ_STORE_UNIT_SIZE and from_off + pos == idx * CQ_STORE_UNIT_SIZE
            and pos + CQ_STORE_UNIT_SIZE <= file_size):
        return -1
    PyObject_GetBuffer(mf.mm, &view, PyBUF_WRITABLE)
    try:
        if view.len < pos + CQ_STORE_UNIT_SIZE:
            return -1
        # CQ_ENTRY ">qiq": CommitLog offset, size, tags code
        p = <unsigned char*>view.buf + pos
        _put64(p, <uint64_t>off)
        _put32(p + 8, <uint32_t>sz)
        _put64(p + 12, <uint64_t>tags)
    finally:
        PyBuffer_Release(&view)
    mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
    cq.max_physic_offset = off + sz
    return 1


def put_message_position_info(cq, offset, size, tags_code, cq_offset):
    """consume_queue.put_message_position_info, compiled."""
    _bind()
    if _put_native(cq, offset, size, tags_code, cq_offset) == 1:
        return True
    return _consume_queue._py_put_message_position_info(cq, offset, size, tags_code, cq_offset)


def dispatch_consume_queue(store, req):
    """message_store.dispatch_consume_queue, compiled: the entry of a record that has one
    (not a prepared or rolled-back transaction half), then the dispatched store time."""
    cdef PyObject* found
    _bind()
    tran = req.sys_flag & TRANSACTION_MASK
    if tran == 0 or tran == TRANSACTION_COMMIT_TYPE:
        topic = req.topic
        queue_id = req.queue_id
        cq = None
        # store.find_consume_queue, its lookup inlined; it creates a missing queue.
        queues = store.consume_queue_table.get(topic)
        if type(queues) is dict:
            found = PyDict_GetItem(queues, queue_id)
            if found is not NULL:
                cq = <object>found
        if cq is None:
            cq = store.find_consume_queue(topic, queue_id)
        offset, size, tags_code, cq_offset = req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset
        if type(cq) is not _ConsumeQueue or _put_native(cq, offset, size, tags_code, cq_offset) != 1:
            cq.put_message_position_info(offset, size, tags_code, cq_offset)
    store.dispatched_store_timestamp = req.store_timestamp


# ---- ReputMessageService: a run of handed-off records ---------------------------------------------

cdef object _reput = None  # orbitmq.broker.store.reput


def dispatch_handed_off(service, offset, Py_ssize_t done, Py_ssize_t max_records, list head, listeners, list run):
    """reput.dispatch_handed_off, compiled: the head dispatchers and the arrival listeners see
    each handed-off record in log order; the records are collected in ``run`` for the last
    dispatcher. The hand-off queue is read inline and listeners called as _notify does, unless
    the service's _take_handed_off / _notify were replaced: then those are called."""
    global _reput
    cdef bint inline_take, inline_notify
    cdef Py_ssize_t i, nhead = len(head)
    if _reput is None:
        from orbitmq.broker.store import reput
        _reput = reput
    log = _reput.log
    cls = _reput.ReputMessageService
    inst = getattr(service, "__dict__", ())
    inline_take = (type(service)._take_handed_off is cls._take_handed_off and "_take_handed_off" not in inst
                   and type(service._handoff) is _reput.deque)
    inline_notify = type(service)._notify is cls._notify and "_notify" not in inst
    handoff = service._handoff
    take = service._take_handed_off
    while done < max_records:
        # _take_handed_off(offset), inlined: the entry at exactly ``offset``, stale ones dropped.
        req = None
        if inline_take:
            while handoff:
                first = handoff[0]
                at = first.commit_log_offset
                if at == offset:
                    req = handoff.popleft()
                    break
                if at > offset:
                    break
                handoff.popleft()
        else:
            req = take(offset)
        if req is None:
            break
        for i in range(nhead):
            dispatcher = head[i]
            try:
                dispatcher(req)
            except Exception:
                log.exception("dispatcher %r failed for CommitLog offset %d", dispatcher, req.commit_log_offset)
        if listeners and req.consume_queue_offset >= 0:
            tran = req.sys_flag & TRANSACTION_MASK
            if tran == 0 or tran == TRANSACTION_COMMIT_TYPE:
                if inline_notify:
                    for listener in service.arrival_listeners:
                        try:
                            listener(req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code,
                                     req.store_timestamp, req.properties)
                        except Exception:
                            log.exception("message arrival listener %r failed", listener)
                else:
                    service._notify(req)
        run.append(req)
        offset += req.msg_size
        service.reput_from_offset = offset
        done += 1
    return offset, done
