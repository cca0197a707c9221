# Shared by the store's accelerators (`include "_speedups_fields.pxi"`): big-endian field
# writers/readers over a buffer the caller has bounds-checked, and an exact-int range check.
# The including module cimports PyLong_AsLongLongAndOverflow and the libc.stdint types.

cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void _put64(unsigned char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)


cdef inline int32_t _get32(const unsigned char* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline bint _as_i64(object o, int64_t lo, int64_t hi, int64_t* out):
    """An exact int within [lo, hi] into ``out``; False for anything else (no exception)."""
    cdef int overflow = 0
    cdef long long v
    if type(o) is not int:
        return False
    v = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow or v < lo or v > hi:
        return False
    out[0] = v
    return True
