# cython: language_level=3
"""Compiled Remoting frame codec: RemotingCommand <-> frame with a JSON (fastjson) header.

The accelerated functions take only the shapes a RocketMQ peer actually sends (a compact, ASCII
JSON header, str extFields, bytes bodies) and hand every other input to the pure-Python code in
orbitmq.remoting.protocol, which stays the oracle: for any input the result, or the exception and
its message, is the Python one. So a fast-path refusal is never an error, only a slower answer.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Next, PyDict_SetItem
from cpython.long cimport PyLong_AsLongLong
from cpython.ref cimport PyObject
from cpython.unicode cimport (
    PyUnicode_AsUTF8AndSize,
    PyUnicode_DATA,
    PyUnicode_FromKindAndData,
    PyUnicode_FromOrdinal,
    PyUnicode_New,
)
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from orbitmq.remoting.protocol import (
    _LANGUAGE_BY_NAME,
    _LANGUAGE_NAMES,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    _py_decode_command,
    _py_encode_command,
    _py_json_header_encode,
)

cdef extern from "Python.h":
    int PyUnicode_4BYTE_KIND
    # borrowed reference; NULL without an exception when the key is missing
    PyObject* _dict_get "PyDict_GetItemWithError"(object d, object key) except? NULL

cdef object _JSON = SerializeType.JSON
cdef object _JAVA = LanguageCode.JAVA
cdef object _LanguageCode = LanguageCode
cdef object _Command = RemotingCommand
cdef object _new_object = object.__new__
cdef dict _language_by_name = dict(_LANGUAGE_BY_NAME)
# LanguageCode (or any key equal to its number) -> the quoted name, as _LANGUAGE_NAMES maps it
cdef dict _language_json = {k: ('"' + v + '"').encode("ascii") for k, v in _LANGUAGE_NAMES.items()}

cdef long long _INT32_MIN = -2147483648
cdef long long _INT32_MAX = 2147483647
cdef Py_ssize_t _MAX_HEADER_LENGTH = 0xFFFFFF
cdef const char* _HEX = b"0123456789abcdef"


# ---- JSON header decode -------------------------------------------------------------------------

cdef object _scan_string(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos):
    """The JSON string whose opening quote is just before s[pos[0]]; pos moves past its closing quote.

    None (fall back) for anything but printable ASCII and the escapes json.loads decodes the same
    way here: raw non-ASCII or control bytes, bad escapes, and \\u escapes of surrogates (json joins
    pairs of those) all go to the Python decoder.
    """
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t start = i
    cdef Py_ssize_t end, k, count
    cdef unsigned char c
    cdef bint escaped = False
    cdef Py_UCS4* buf
    cdef unsigned int u
    cdef int d
    cdef object text
    while i < n:
        c = s[i]
        if c == 34:  # closing quote
            break
        if c == 92:  # backslash: the next byte is escaped, whatever it is
            escaped = True
            i += 2
            continue
        if c < 0x20 or c >= 0x80:
            return None
        i += 1
    if i >= n:
        return None  # unterminated (or a backslash as the last byte)
    end = i
    pos[0] = end + 1
    if not escaped:
        if end - start == 1:
            return PyUnicode_FromOrdinal(s[start])  # CPython's cached one-character str (V2 header keys)
        text = PyUnicode_New(end - start, 127)
        memcpy(PyUnicode_DATA(text), s + start, end - start)
        return text
    buf = <Py_UCS4*>malloc((end - start) * sizeof(Py_UCS4))
    if buf == NULL:
        raise MemoryError()
    try:
        count = 0
        k = start
        while k < end:
            c = s[k]
            if c != 92:
                if c < 0x20 or c >= 0x80:
                    return None
                buf[count] = c
                count += 1
                k += 1
                continue
            if k + 1 >= end:
                return None
            c = s[k + 1]
            k += 2
            if c == 34 or c == 92 or c == 47:  # " \ /
                u = c
            elif c == 98:  # b
                u = 8
            elif c == 102:  # f
                u = 12
            elif c == 110:  # n
                u = 10
            elif c == 114:  # r
                u = 13
            elif c == 116:  # t
                u = 9
            elif c == 117:  # u
                if k + 4 > end:
                    return None
                u = 0
                for d in range(4):
                    c = s[k + d]
                    if 48 <= c <= 57:
                        u = u * 16 + (c - 48)
                    elif 97 <= c <= 102:
                        u = u * 16 + (c - 87)
                    elif 65 <= c <= 70:
                        u = u * 16 + (c - 55)
                    else:
                        return None
                k += 4
                if 0xD800 <= u <= 0xDFFF:
                    return None
            else:
                return None
            buf[count] = <Py_UCS4>u
            count += 1
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, count)
    finally:
        free(buf)


cdef int _scan_int(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos, long long* out):
    """A JSON integer of at most 10 digits (what fits an int32 and then some); -1 to fall back."""
    cdef Py_ssize_t i = pos[0]
    cdef bint negative = False
    cdef long long value = 0
    cdef int digits = 0
    cdef unsigned char c
    if i < n and s[i] == 45:  # '-'
        negative = True
        i += 1
    if i >= n:
        return -1
    c = s[i]
    if c == 48:  # a leading 0 stands alone
        i += 1
    elif 49 <= c <= 57:
        while i < n and 48 <= s[i] <= 57:
            digits += 1
            if digits > 10:
                return -1
            value = value * 10 + (s[i] - 48)
            i += 1
    else:
        return -1
    if i < n:
        c = s[i]
        if c == 46 or c == 101 or c == 69 or 48 <= c <= 57:  # a fraction, exponent or 01: json's business
            return -1
    pos[0] = i
    out[0] = -value if negative else value
    return 0


cdef inline bint _literal(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos, const char* word, Py_ssize_t size):
    if pos[0] + size <= n and memcmp(s + pos[0], word, size) == 0:
        pos[0] += size
        return True
    return False


cdef int _skip_value(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos):
    """Step over a value of a key the header ignores: string, integer, null, true or false."""
    cdef long long ignored
    cdef unsigned char c
    if pos[0] >= n:
        return -1
    c = s[pos[0]]
    if c == 34:
        pos[0] += 1
        return 0 if _scan_string(s, n, pos) is not None else -1
    if c == 110:
        return 0 if _literal(s, n, pos, b"null", 4) else -1
    if c == 116:
        return 0 if _literal(s, n, pos, b"true", 4) else -1
    if c == 102:
        return 0 if _literal(s, n, pos, b"false", 5) else -1
    return _scan_int(s, n, pos, &ignored)


cdef int _header_int(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos, long long* out):
    """code/flag/opaque/version: an int32, or null for the default 0."""
    if _literal(s, n, pos, b"null", 4):
        out[0] = 0
        return 0
    if _scan_int(s, n, pos, out) < 0 or not _INT32_MIN <= out[0] <= _INT32_MAX:
        return -1
    return 0


cdef object _scan_ext_fields(const unsigned char* s, Py_ssize_t n, Py_ssize_t* pos):
    """extFields: an object of string values (a new dict), null for {}; None to fall back."""
    cdef dict ext = {}
    cdef object key, value
    if _literal(s, n, pos, b"null", 4):
        return ext
    if pos[0] >= n or s[pos[0]] != 123:  # '{'
        return None
    pos[0] += 1
    if pos[0] < n and s[pos[0]] == 125:  # '}'
        pos[0] += 1
        return ext
    while True:
        if pos[0] >= n or s[pos[0]] != 34:
            return None
        pos[0] += 1
        key = _scan_string(s, n, pos)
        if key is None or pos[0] >= n or s[pos[0]] != 58:  # ':'
            return None
        pos[0] += 1
        if pos[0] >= n or s[pos[0]] != 34:
            return None  # null, numbers, ...: the Python decoder converts or refuses them
        pos[0] += 1
        value = _scan_string(s, n, pos)
        if value is None:
            return None
        PyDict_SetItem(ext, key, value)
        if pos[0] >= n:
            return None
        if s[pos[0]] == 44:  # ','
            pos[0] += 1
        elif s[pos[0]] == 125:
            pos[0] += 1
            return ext
        else:
            return None


cdef inline bint _key_is(const unsigned char* s, Py_ssize_t start, Py_ssize_t size, const char* name,
                         Py_ssize_t name_size):
    return size == name_size and memcmp(s + start, name, size) == 0


cdef object _decode_json(const unsigned char* s, Py_ssize_t n, const unsigned char* body, Py_ssize_t body_size):
    """The RemotingCommand of a JSON header s[:n] and a copy of body[:body_size], or None."""
    cdef Py_ssize_t i = 1
    cdef Py_ssize_t key_start, key_size
    cdef long long code = 0, flag = 0, opaque = 0, version = 0
    cdef object language = _JAVA
    cdef object remark = None
    cdef object ext = None
    cdef object text
    cdef PyObject* found
    cdef unsigned char c
    if n < 2 or s[0] != 123:
        return None
    if s[1] == 125:
        if n != 2:
            return None
    else:
        while True:
            if i >= n or s[i] != 34:
                return None
            i += 1
            key_start = i
            while i < n and s[i] != 34:
                c = s[i]
                if c == 92 or c < 0x20 or c >= 0x80:
                    return None  # escaped or unusual keys: the Python decoder
                i += 1
            if i + 1 >= n or s[i + 1] != 58:
                return None
            key_size = i - key_start
            i += 2
            if _key_is(s, key_start, key_size, b"code", 4):
                if _header_int(s, n, &i, &code) < 0:
                    return None
            elif _key_is(s, key_start, key_size, b"extFields", 9):
                ext = _scan_ext_fields(s, n, &i)
                if ext is None:
                    return None
            elif _key_is(s, key_start, key_size, b"flag", 4):
                if _header_int(s, n, &i, &flag) < 0:
                    return None
            elif _key_is(s, key_start, key_size, b"language", 8):
                if i >= n or s[i] != 34:
                    return None
                i += 1
                text = _scan_string(s, n, &i)
                if text is None:
                    return None
                found = _dict_get(_language_by_name, text)
                if found == NULL:
                    return None
                language = <object>found
            elif _key_is(s, key_start, key_size, b"opaque", 6):
                if _header_int(s, n, &i, &opaque) < 0:
                    return None
            elif _key_is(s, key_start, key_size, b"remark", 6):
                if _literal(s, n, &i, b"null", 4):
                    remark = None
                elif i < n and s[i] == 34:
                    i += 1
                    remark = _scan_string(s, n, &i)
                    if remark is None:
                        return None
                else:
                    return None
            elif _key_is(s, key_start, key_size, b"version", 7):
                if _header_int(s, n, &i, &version) < 0:
                    return None
            elif _skip_value(s, n, &i) < 0:  # serializeTypeCurrentRPC and keys we do not know
                return None
            if i >= n:
                return None
            if s[i] == 44:
                i += 1
            elif s[i] == 125:
                if i + 1 != n:
                    return None
                break
            else:
                return None
    if ext is None:
        ext = {}
    cmd = _new_object(_Command)
    # the attributes in the dataclass's field order, as its __init__ would set them
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = PyBytes_FromStringAndSize(<const char*>body, body_size)
    cmd.serialize_type = _JSON
    return cmd


def decode_command(data, start, stop):
    """protocol.decode_command: the command in data[start:stop], a frame without its length field."""
    cdef Py_ssize_t first, last, size, header_length
    cdef const unsigned char* p
    cdef unsigned int word
    cdef object cmd
    if type(data) is not bytes or type(start) is not int or type(stop) is not int:
        return _py_decode_command(data, start, stop)
    size = PyBytes_GET_SIZE(data)
    if not (0 <= start <= stop <= size):
        return _py_decode_command(data, start, stop)
    first = start
    last = stop
    if last - first < 4:
        return _py_decode_command(data, start, stop)
    p = <const unsigned char*>PyBytes_AS_STRING(data) + first
    word = (<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3]
    header_length = word & 0xFFFFFF
    if (word >> 24) != 0 or header_length > last - first - 4:
        return _py_decode_command(data, start, stop)  # ROCKETMQ headers, bad lengths and types
    cmd = _decode_json(p + 4, header_length, p + 4 + header_length, last - first - 4 - header_length)
    if cmd is None:
        return _py_decode_command(data, start, stop)
    return cmd



# ---- JSON header encode -------------------------------------------------------------------------

cdef struct Buffer:
    char* data
    Py_ssize_t size
    Py_ssize_t capacity
    bint owned


cdef int _reserve(Buffer* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t want = b.size + extra
    cdef Py_ssize_t capacity
    cdef char* grown
    if want <= b.capacity:
        return 0
    capacity = max(want, 2 * b.capacity)
    if b.owned:
        grown = <char*>realloc(b.data, capacity)
    else:
        grown = <char*>malloc(capacity)
        if grown != NULL:
            memcpy(grown, b.data, b.size)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.capacity = capacity
    b.owned = True
    return 0


cdef int _put(Buffer* b, const char* chunk, Py_ssize_t size) except -1:
    _reserve(b, size)
    memcpy(b.data + b.size, chunk, size)
    b.size += size
    return 0


cdef int _put_int(Buffer* b, long long value) except -1:
    cdef char digits[24]
    cdef int count = 0
    cdef unsigned long long magnitude = <unsigned long long>(-(value + 1)) + 1 if value < 0 else <unsigned long long>value
    _reserve(b, 24)
    if value < 0:
        b.data[b.size] = 45
        b.size += 1
    while True:
        digits[count] = <char>(48 + magnitude % 10)
        count += 1
        magnitude //= 10
        if magnitude == 0:
            break
    while count > 0:
        count -= 1
        b.data[b.size] = digits[count]
        b.size += 1
    return 0


cdef int _put_json_string(Buffer* b, object text) except -1:
    """encode_basestring (ensure_ascii=False) of an exact str, UTF-8. -1 with UnicodeEncodeError
    for lone surrogates, which the caller turns into the Python path's error."""
    cdef Py_ssize_t size, i
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &size)
    cdef unsigned char c
    cdef char* out
    _reserve(b, 6 * size + 2)
    out = b.data + b.size
    out[0] = 34
    out += 1
    for i in range(size):
        c = s[i]
        if c >= 0x20 and c != 34 and c != 92:
            out[0] = <char>c
            out += 1
        elif c == 34 or c == 92:
            out[0] = 92
            out[1] = <char>c
            out += 2
        elif c == 10:
            out[0] = 92
            out[1] = 110
            out += 2
        elif c == 13:
            out[0] = 92
            out[1] = 114
            out += 2
        elif c == 9:
            out[0] = 92
            out[1] = 116
            out += 2
        elif c == 8:
            out[0] = 92
            out[1] = 98
            out += 2
        elif c == 12:
            out[0] = 92
            out[1] = 102
            out += 2
        else:
            memcpy(out, b"\\u00", 4)
            out[4] = _HEX[c >> 4]
            out[5] = _HEX[c & 15]
            out += 6
    out[0] = 34
    out += 1
    b.size = out - b.data
    return 0


cdef bint _exact_int(object value, long long* out):
    """An exact int that fits a long long (what int(value)!r renders as its decimal digits)."""
    if type(value) is not int:
        return False
    try:
        out[0] = PyLong_AsLongLong(value)
    except OverflowError:
        return False
    return True


cdef int _json_header(Buffer* b, object cmd) except -2:
    """_json_header_encode of cmd into b; 1 when cmd is not a shape handled here (fall back)."""
    cdef long long code, flag, opaque, version
    cdef Py_ssize_t pos = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef PyObject* language
    cdef object ext, remark
    cdef bint first = True
    if type(cmd) is not _Command or cmd.serialize_type is not _JSON:
        return 1
    if not (_exact_int(cmd.code, &code) and _exact_int(cmd.flag, &flag) and _exact_int(cmd.opaque, &opaque)
            and _exact_int(cmd.version, &version)):
        return 1
    # only keys whose hash and == are int's, so the lookup runs no Python code and cannot raise
    if type(cmd.language) is not _LanguageCode and type(cmd.language) is not int:
        return 1
    language = _dict_get(_language_json, cmd.language)
    if language == NULL:
        return 1
    remark = cmd.remark
    if remark is not None and type(remark) is not str:
        return 1
    ext = cmd.ext_fields
    if type(ext) is not dict:
        return 1
    while PyDict_Next(ext, &pos, &key, &value):
        if type(<object>key) is not str or type(<object>value) is not str:
            return 1
    try:
        _put(b, b'{"code":', 8)
        _put_int(b, code)
        if ext:
            _put(b, b',"extFields":{', 14)
            pos = 0
            while PyDict_Next(ext, &pos, &key, &value):
                if not first:
                    _put(b, b",", 1)
                first = False
                _put_json_string(b, <object>key)
                _put(b, b":", 1)
                _put_json_string(b, <object>value)
            _put(b, b"}", 1)
        _put(b, b',"flag":', 8)
        _put_int(b, flag)
        _put(b, b',"language":', 12)
        _put(b, PyBytes_AS_STRING(<bytes>language), PyBytes_GET_SIZE(<bytes>language))
        _put(b, b',"opaque":', 10)
        _put_int(b, opaque)
        if remark is not None:
            _put(b, b',"remark":', 10)
            _put_json_string(b, remark)
        _put(b, b',"serializeTypeCurrentRPC":"JSON","version":', 44)
        _put_int(b, version)
        _put(b, b"}", 1)
    except UnicodeEncodeError:  # a lone surrogate: the Python path raises the error that names it
        return 1
    return 0


def json_header_encode(cmd):
    """protocol._json_header_encode."""
    cdef char stack[1024]
    cdef Buffer b
    b.data = stack
    b.size = 0
    b.capacity = sizeof(stack)
    b.owned = False
    try:
        if _json_header(&b, cmd) != 0:
            return _py_json_header_encode(cmd)
        return PyBytes_FromStringAndSize(b.data, b.size)
    finally:
        if b.owned:
            free(b.data)


def encode_command(cmd):
    """protocol._encode_command (RemotingCommand.encode): the whole frame, length field included."""
    cdef char stack[2048]
    cdef Buffer b
    cdef object body
    cdef const char* body_data
    cdef Py_ssize_t body_size, total
    cdef bytes frame
    cdef unsigned char* out
    b.data = stack
    b.size = 0
    b.capacity = sizeof(stack)
    b.owned = False
    try:
        if _json_header(&b, cmd) != 0 or b.size > _MAX_HEADER_LENGTH:
            return _py_encode_command(cmd)
        # read after the header, so no Python code runs between taking the pointer and the copy
        body = cmd.body
        if type(body) is bytes:
            body_data = PyBytes_AS_STRING(body)
            body_size = PyBytes_GET_SIZE(body)
        elif type(body) is bytearray:
            body_data = PyByteArray_AS_STRING(body)
            body_size = PyByteArray_GET_SIZE(body)
        elif body is None:
            body_data = NULL
            body_size = 0
        else:
            return _py_encode_command(cmd)
        total = 4 + b.size + body_size
        if total > _INT32_MAX:
            return _py_encode_command(cmd)
        frame = PyBytes_FromStringAndSize(NULL, 4 + total)
        out = <unsigned char*>PyBytes_AS_STRING(frame)
        out[0] = (total >> 24) & 0xFF
        out[1] = (total >> 16) & 0xFF
        out[2] = (total >> 8) & 0xFF
        out[3] = total & 0xFF
        out[4] = 0  # SerializeType.JSON
        out[5] = (b.size >> 16) & 0xFF
        out[6] = (b.size >> 8) & 0xFF
        out[7] = b.size & 0xFF
        memcpy(out + 8, b.data, b.size)
        if body_size:
            memcpy(out + 8 + b.size, body_data, body_size)
        return frame
    finally:
        if b.owned:
            free(b.data)
