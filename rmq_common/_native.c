/* The few loops over record bytes that have no vector form in numpy or Arrow, each done for a whole batch in
 * one call and without the GIL:
 *   crc32_spans   RocketMQ's BODYCRC of many bodies (zlib has no batched form and costs ~0.4 us a call);
 *   property_pairs the key/value spans of many RocketMQ properties texts (`k\x01v\x02...`);
 *   property_columns the string columns of a few wanted keys of many properties texts (what a filter reads);
 *   properties_without many properties texts without the pairs of a few keys (a committed half's properties);
 *   strings_in    which strings of a column equal one of a few constants (a filter's = and IN);
 *   decimal_longs the plain decimal integers of a string column (a filter's numeric comparisons);
 *   gather_spans  many byte spans copied back to back (the data of an Arrow binary/string column);
 *   decode_v4_records / properties_columns  the scan's columns of many records in one pass (store/scan.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "crc32.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static int little_endian(void) {
    uint16_t x = 1;
    return *(uint8_t *)&x == 1;
}

/* Checks that every span [s[i], e[i]) lies inside a buffer of len bytes. */
static int spans_inside(const int64_t *s, const int64_t *e, Py_ssize_t n, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > len) {
            PyErr_Format(PyExc_ValueError, "span %zd [%lld, %lld) is outside the buffer of %zd bytes", i,
                         (long long)s[i], (long long)e[i], len);
            return 0;
        }
    }
    return 1;
}

/* crc32_spans(data, starts, ends, out): out[i] = crc32(data[starts[i]:ends[i]]); starts/ends int64, out uint32. */
static PyObject *crc32_spans(PyObject *self, PyObject *args) {
    Py_buffer data, starts, ends, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &data, &starts, &ends, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8;
    if (ends.len / 8 != n || out.len / 4 < n) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and out must describe the same number of spans");
        goto done;
    }
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    if (!spans_inside(s, e, n, data.len)) goto done;
    uint32_t *o = (uint32_t *)out.buf;
    const uint8_t *base = (const uint8_t *)data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) o[i] = crc32_of(base + s[i], (size_t)(e[i] - s[i]));
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&out);
    return result;
}

/* The kept pairs of one properties text base[p:end], as RocketMQ's string2messageProperties keeps them: pairs end
 * at \x02 (the last may lack it), the first \x01 splits key from value, an empty key or value drops the pair, and
 * a key seen before in the text takes the earlier one's place with the later value (a map, as Java's
 * HashMap.put and Python's dict keep it; texts hold a handful of pairs). Pair j's start, \x01 and end go to
 * ks[j], sk[j], es[j] for j from m on; returns the new count, or -1 when a pair would go past cap. */
static Py_ssize_t text_pairs(const char *base, int64_t p, int64_t end, int64_t *ks, int64_t *sk, int64_t *es,
                             Py_ssize_t m, Py_ssize_t cap) {
    Py_ssize_t first = m;
    while (p < end) {
        const char *q = memchr(base + p, 2, (size_t)(end - p));
        int64_t pair_end = q ? (int64_t)(q - base) : end;
        const char *k = memchr(base + p, 1, (size_t)(pair_end - p));
        if (k) {
            int64_t sep = (int64_t)(k - base);
            if (sep > p && sep < pair_end - 1) {
                Py_ssize_t j = first;
                for (; j < m; j++)
                    if (sk[j] - ks[j] == sep - p && memcmp(base + ks[j], base + p, (size_t)(sep - p)) == 0)
                        break;
                if (j == m) {
                    if (m >= cap) return -1;
                    m++;
                }
                ks[j] = p; sk[j] = sep; es[j] = pair_end;
            }
        }
        p = pair_end + 1;
    }
    return m;
}

/* property_pairs(data, starts, ends, rows, keys, seps, pair_ends) -> count.
 * Row r's text is data[starts[r]:ends[r]]. Pairs end at \x02 (the last may lack it); a pair is kept when its
 * first \x01 leaves a non-empty key and a non-empty value (RocketMQ's string2messageProperties). For kept pair
 * j: rows[j] = r, keys[j] = pair start, seps[j] = position of the \x01, pair_ends[j] = end of the value. The
 * four outputs are int64 buffers with room for at least (number of \x02 bytes + number of rows) pairs. */
static PyObject *property_pairs(PyObject *self, PyObject *args) {
    Py_buffer data, starts, ends, rows, keys, seps, pends;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*", &data, &starts, &ends, &rows, &keys, &seps, &pends))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8, cap = rows.len / 8, count = 0;
    if (ends.len / 8 != n || keys.len / 8 < cap || seps.len / 8 < cap || pends.len / 8 < cap) {
        PyErr_SetString(PyExc_ValueError, "property_pairs: inconsistent buffer sizes");
        goto done;
    }
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    if (!spans_inside(s, e, n, data.len)) goto done;
    int64_t *ro = (int64_t *)rows.buf, *ko = (int64_t *)keys.buf, *so = (int64_t *)seps.buf;
    int64_t *eo = (int64_t *)pends.buf;
    const char *base = (const char *)data.buf;
    int overflow = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        Py_ssize_t next = text_pairs(base, s[r], e[r], ko, so, eo, count, cap);
        if (next < 0) { overflow = 1; break; }
        for (; count < next; count++) ro[count] = r;
    }
    Py_END_ALLOW_THREADS
    if (overflow) {
        PyErr_SetString(PyExc_ValueError, "property_pairs: output buffers too small");
        goto done;
    }
    result = PyLong_FromSsize_t(count);
done:
    PyBuffer_Release(&data); PyBuffer_Release(&starts); PyBuffer_Release(&ends); PyBuffer_Release(&rows);
    PyBuffer_Release(&keys); PyBuffer_Release(&seps); PyBuffer_Release(&pends);
    return result;
}

/* Bit i of the result is set when p[i] is \x02 (i < count <= 64): where the pairs of a properties text end. */
static inline uint64_t pair_end_bits(const uint8_t *p, int count) {
    uint64_t bits = 0;
#ifdef __SSE2__
    if (count == 64) {
        const __m128i two = _mm_set1_epi8(2);
        for (int i = 0; i < 4; i++)
            bits |= (uint64_t)(uint32_t)_mm_movemask_epi8(
                        _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), two)) << (16 * i);
        return bits;
    }
#endif
    for (int i = 0; i < count; i++) bits |= (uint64_t)(p[i] == 2) << i;
    return bits;
}

static inline int lowest_bit(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(m);
#else
    int i = 0;
    while (!(m & 1u)) { m >>= 1; i++; }
    return i;
#endif
}

/* A wanted key as the bytes a matching pair starts with: the name, then \x01 (the pair's first \x01 then ends
 * the key exactly, as the name holds neither separator); `head` is its first 8 of those bytes as one word. */
typedef struct {
    const uint8_t *name;
    int64_t len;      /* of the name; -1: a name no stored key can equal (it holds \x01 or \x02, or is empty) */
    uint64_t head, head_mask;
} wanted_key;

static inline uint64_t load_word(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Whether the pair data[pair:q] is `name \x01 value` with a non-empty value; head: the pair's first 8 bytes as a
 * word, when they could be read (little-endian machines). */
static inline int pair_has_key(const wanted_key *k, const uint8_t *base, int64_t pair, int64_t q, int word,
                               uint64_t head) {
    if (k->len < 0 || q - pair < k->len + 2) return 0;
    if (word ? (head & k->head_mask) != k->head : memcmp(base + pair, k->name, (size_t)k->len) != 0) return 0;
    return base[pair + k->len] == 1 && (k->len < 8 || memcmp(base + pair, k->name, (size_t)k->len) == 0);
}

/* Grows a values bytearray to hold at least `want` bytes, with the GIL held (the caller has released it). */
static int grow_values(PyObject *values, char **buf, int64_t *cap, int64_t want, PyThreadState **saved) {
    int64_t size = 2 * *cap > want ? 2 * *cap : want;
    PyEval_RestoreThread(*saved);
    int ok = PyByteArray_Resize(values, (Py_ssize_t)size) == 0;
    *saved = PyEval_SaveThread();
    *buf = PyByteArray_AS_STRING(values);
    *cap = (int64_t)PyByteArray_GET_SIZE(values);
    return ok;
}

/* property_columns(data, starts, ends, keys, key_ends, validity, offsets) -> list of bytearrays.
 * Row r's text is data[starts[r]:ends[r]]; the wanted keys are the UTF-8 names in `keys`, back to back, name j
 * ending at key_ends[j] (int64, distinct names). Same pair rules as property_pairs. For name j, the result is the
 * string column of that property's value per row (the row's last kept pair with that key; null where none) as
 * Arrow buffers: validity bits j*((n+7)/8).. (zeroed by the caller), int32 offsets j*(n+1).., and the values,
 * returned. One pass over the bytes for all the names: \x02s are found 64 bytes at a time, each pair's start is
 * compared with the names (as words where 8 bytes can be read), and a value is copied while its bytes are in
 * cache. */
static PyObject *property_columns(PyObject *self, PyObject *args) {
    Py_buffer data, starts, ends, keys, key_ends, validity, offsets;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*", &data, &starts, &ends, &keys, &key_ends, &validity, &offsets))
        return NULL;
    PyObject *result = NULL;
    wanted_key *wanted = NULL;
    int64_t *pos = NULL;
    char **out = NULL;
    uint64_t by_first_byte[256] = {0};  /* bit j: wanted key j starts with that byte (keys 0..63) */
    Py_ssize_t n = starts.len / 8, nk = key_ends.len / 8, nbytes = (n + 7) / 8;
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    const int64_t *kend = (const int64_t *)key_ends.buf;
    if (ends.len / 8 != n || validity.len != nbytes * nk || offsets.len / 4 != (n + 1) * nk) {
        PyErr_SetString(PyExc_ValueError, "property_columns: inconsistent buffer sizes");
        goto done;
    }
    if (!spans_inside(s, e, n, data.len)) goto done;
    wanted = PyMem_Calloc(nk ? (size_t)nk : 1, sizeof(wanted_key));
    pos = PyMem_Calloc(3 * (nk ? (size_t)nk : 1), sizeof(int64_t));
    out = PyMem_Calloc(nk ? (size_t)nk : 1, sizeof(char *));
    result = PyList_New(nk);
    if (!wanted || !pos || !out || !result) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t j = 0; j < nk; j++) {
        int64_t k0 = j ? kend[j - 1] : 0;
        if (kend[j] < k0 || kend[j] > keys.len) {
            PyErr_SetString(PyExc_ValueError, "property_columns: key_ends do not describe the keys buffer");
            goto fail;
        }
        const uint8_t *name = (const uint8_t *)keys.buf + k0;
        int64_t len = kend[j] - k0;
        wanted[j].name = name;
        wanted[j].len = len && !memchr(name, 1, (size_t)len) && !memchr(name, 2, (size_t)len) ? len : -1;
        for (int64_t i = 0; i < 8 && i <= len; i++) {
            wanted[j].head |= (uint64_t)(i < len ? name[i] : 1) << (8 * i);
            wanted[j].head_mask |= (uint64_t)0xFF << (8 * i);
        }
        if (j < 64 && wanted[j].len > 0) by_first_byte[name[0]] |= (uint64_t)1 << j;
        PyObject *values = PyByteArray_FromStringAndSize(NULL, 8 * n + 64);
        if (!values) goto fail;
        PyList_SET_ITEM(result, j, values);
        out[j] = PyByteArray_AS_STRING(values);
        pos[2 * nk + j] = 8 * n + 64;
    }
    int64_t *row_pos = pos + nk;  /* where each column's values for the current row begin */
    int64_t *cap = pos + 2 * nk;  /* the size of each values bytearray */
    uint8_t *valid = (uint8_t *)validity.buf;
    int32_t *offs = (int32_t *)offsets.buf;
    const uint8_t *base = (const uint8_t *)data.buf;
    const int64_t len = (int64_t)data.len;
    int le = little_endian(), failed = 0;
    PyThreadState *saved = PyEval_SaveThread();
    for (Py_ssize_t j = 0; j < nk; j++) offs[j * (n + 1)] = 0;
    for (Py_ssize_t r = 0; r < n && !failed; r++) {
        const int64_t end = e[r];
        int64_t pair = s[r];
        for (Py_ssize_t j = 0; j < nk; j++) row_pos[j] = pos[j];
        for (int64_t block = s[r]; block <= end && !failed; block += 64) {
            /* The row's end acts as a last \x02; a block may read past it (never past the buffer) and ignores that. */
            int64_t left = end - block;
            uint64_t m = 0;
            if (left > 0) {
                m = pair_end_bits(base + block, len - block >= 64 ? 64 : (int)(len - block));
                if (left < 64) m &= ((uint64_t)1 << left) - 1;
            }
            if (left < 64) m |= (uint64_t)1 << left;
            while (m) {
                int64_t q = block + lowest_bit(m);  /* the pair is data[pair:q] */
                m &= m - 1;
                /* at least a key byte, the \x01 and a value byte; then only the names with that first byte */
                uint64_t candidates = q - pair >= 3 ? by_first_byte[base[pair]] : 0;
                int word = le && pair + 8 <= len;
                uint64_t head = word && (candidates || nk > 64) ? load_word(base + pair) : 0;
                Py_ssize_t j = -1;
                while (candidates) {
                    int c = lowest_bit(candidates);
                    candidates &= candidates - 1;
                    if (pair_has_key(&wanted[c], base, pair, q, word, head)) {
                        j = c;
                        break;
                    }
                }
                for (Py_ssize_t c = 64; c < nk && j < 0; c++)  /* names beyond the first 64, rarely wanted */
                    if (pair_has_key(&wanted[c], base, pair, q, word, head)) j = c;
                if (j >= 0) {
                    /* the value, over an earlier one of the same key in this row (the later duplicate wins) */
                    int64_t from = pair + wanted[j].len + 1, size = q - from, at = row_pos[j];
                    /* room for the value and 16 bytes of slack (short values are copied as 16 bytes) */
                    if (at + size > INT32_MAX ||
                        (at + size + 16 > cap[j] &&
                         !grow_values(PyList_GET_ITEM(result, j), &out[j], &cap[j], at + size + 16, &saved))) {
                        failed = 1;
                        break;
                    }
                    if (size <= 16 && from + 16 <= len)
                        memcpy(out[j] + at, base + from, 16);
                    else
                        memcpy(out[j] + at, base + from, (size_t)size);
                    pos[j] = at + size;
                }
                pair = q + 1;
            }
        }
        for (Py_ssize_t j = 0; j < nk; j++) offs[j * (n + 1) + r + 1] = (int32_t)pos[j];
    }
    /* A kept value is never empty: a row has one where its offsets grow. */
    for (Py_ssize_t j = 0; j < nk && !failed; j++) {
        const int32_t *oj = offs + j * (n + 1);
        uint8_t *vj = valid + j * nbytes;
        for (Py_ssize_t r = 0; r < n; r++) vj[r >> 3] |= (uint8_t)((oj[r + 1] > oj[r]) << (r & 7));
    }
    PyEval_RestoreThread(saved);
    if (failed) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "property_columns: a column's values exceed 2 GiB; use smaller batches");
        goto fail;
    }
    for (Py_ssize_t j = 0; j < nk; j++)
        if (PyByteArray_Resize(PyList_GET_ITEM(result, j), (Py_ssize_t)pos[j]) != 0) goto fail;
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(wanted);
    PyMem_Free(pos);
    PyMem_Free(out);
    PyBuffer_Release(&data); PyBuffer_Release(&starts); PyBuffer_Release(&ends); PyBuffer_Release(&keys);
    PyBuffer_Release(&key_ends); PyBuffer_Release(&validity); PyBuffer_Release(&offsets);
    return result;
}

/* properties_without(data, starts, ends, keys, key_ends, offsets) -> bytearray: row r's text
 * data[starts[r]:ends[r]] without the pairs whose key (the bytes before the pair's first \x01) is one of the
 * names in `keys` (back to back, name j ending at key_ends[j]); every other byte kept as it is, and a \x02 after
 * a last pair that lacked one. The new texts lie back to back in the result, row r at offsets[r]..offsets[r+1]
 * (int32, n+1). Rewriting a few properties of many stored messages without building their maps. */
static PyObject *properties_without(PyObject *self, PyObject *args) {
    Py_buffer data, starts, ends, keys, key_ends, offsets;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*", &data, &starts, &ends, &keys, &key_ends, &offsets)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8, nk = key_ends.len / 8;
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    const int64_t *kend = (const int64_t *)key_ends.buf;
    const uint8_t *base = (const uint8_t *)data.buf, *names = (const uint8_t *)keys.buf;
    int32_t *offs = (int32_t *)offsets.buf;
    if (ends.len / 8 != n || offsets.len / 4 != n + 1) {
        PyErr_SetString(PyExc_ValueError, "properties_without: inconsistent buffer sizes");
        goto done;
    }
    if (!spans_inside(s, e, n, data.len)) goto done;
    for (Py_ssize_t j = 0; j < nk; j++)
        if (kend[j] < (j ? kend[j - 1] : 0) || kend[j] > keys.len) {
            PyErr_SetString(PyExc_ValueError, "properties_without: key_ends do not describe the keys buffer");
            goto done;
        }
    int64_t total = 0;
    for (Py_ssize_t r = 0; r < n; r++) total += e[r] - s[r] + 1;
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "properties_without: the texts exceed 2 GiB; use smaller batches");
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!result) goto done;
    uint8_t *out = (uint8_t *)PyByteArray_AS_STRING(result);
    int64_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    offs[0] = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t pair = s[r];
        while (pair < e[r]) {
            const uint8_t *p = base + pair;
            const uint8_t *sep = memchr(p, 2, (size_t)(e[r] - pair));
            int64_t q = sep ? pair + (sep - p) : e[r];  /* the pair is data[pair:q] */
            const uint8_t *eq = memchr(p, 1, (size_t)(q - pair));
            int64_t klen = eq ? eq - p : -1;
            int drop = 0;
            for (Py_ssize_t j = 0; j < nk && klen >= 0 && !drop; j++) {
                int64_t k0 = j ? kend[j - 1] : 0;
                drop = kend[j] - k0 == klen && memcmp(names + k0, p, (size_t)klen) == 0;
            }
            if (!drop) {
                memcpy(out + at, p, (size_t)(q - pair));
                at += q - pair;
                out[at++] = 2;
            }
            pair = q + 1;
        }
        offs[r + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    if (PyByteArray_Resize(result, (Py_ssize_t)at) != 0) Py_CLEAR(result);
done:
    PyBuffer_Release(&data); PyBuffer_Release(&starts); PyBuffer_Release(&ends); PyBuffer_Release(&keys);
    PyBuffer_Release(&key_ends); PyBuffer_Release(&offsets);
    return result;
}

/* Checks that the n strings of an Arrow string column (int32 offsets) lie inside its data of len bytes. */
static int strings_inside(const int32_t *o, Py_ssize_t n, Py_ssize_t len, const char *caller) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > len) {
            PyErr_Format(PyExc_ValueError, "%s: string %zd [%d, %d) is outside the data of %zd bytes", caller, i,
                         o[i], o[i + 1], len);
            return 0;
        }
    }
    return 1;
}

/* strings_in(offsets, data, literals, literal_ends, out): out[i] = 1 when the string data[offsets[i]:offsets[i+1]]
 * (int32 offsets, an Arrow string column's) is one of the literals (UTF-8, back to back, literal j ending at
 * literal_ends[j]), else 0: a filter's `=` / IN against string constants, without Arrow's per-kernel overhead.
 * Strings of at most 8 bytes are compared as one masked word with every literal, without branches. */
static PyObject *strings_in(PyObject *self, PyObject *args) {
    Py_buffer offsets, data, literals, literal_ends, out;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &offsets, &data, &literals, &literal_ends, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = offsets.len / 4 - 1, nl = literal_ends.len / 8;
    uint64_t *words = NULL;  /* per literal: its bytes as a little-endian word (when at most 8), mask, length */
    const int32_t *o = (const int32_t *)offsets.buf;
    const int64_t *lend = (const int64_t *)literal_ends.buf;
    if (n < 0 || out.len != n) {
        PyErr_SetString(PyExc_ValueError, "strings_in: out must have one byte per string");
        goto done;
    }
    if (!strings_inside(o, n, data.len, "strings_in")) goto done;
    words = PyMem_Calloc(3 * (nl ? (size_t)nl : 1), sizeof(uint64_t));
    if (!words) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t *masks = words + nl, *lens = words + 2 * nl;
    for (Py_ssize_t j = 0; j < nl; j++) {
        int64_t l0 = j ? lend[j - 1] : 0;
        if (lend[j] < l0 || lend[j] > literals.len) {
            PyErr_SetString(PyExc_ValueError, "strings_in: literal_ends do not describe the literals buffer");
            goto done;
        }
        lens[j] = (uint64_t)(lend[j] - l0);
        if (lens[j] <= 8) memcpy(&words[j], (const uint8_t *)literals.buf + l0, (size_t)lens[j]);
        masks[j] = lens[j] >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * lens[j])) - 1;
    }
    const uint8_t *base = (const uint8_t *)data.buf, *lit = (const uint8_t *)literals.buf;
    uint8_t *hit = (uint8_t *)out.buf;
    const int64_t len = (int64_t)data.len;
    int le = little_endian();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = o[i], size = (int64_t)o[i + 1] - at;
        uint8_t found = 0;
        if (size <= 8 && le && at + 8 <= len) {
            uint64_t a = load_word(base + at);
            for (Py_ssize_t j = 0; j < nl; j++) found |= (lens[j] == (uint64_t)size) & (((a ^ words[j]) & masks[j]) == 0);
        } else {
            for (Py_ssize_t j = 0; j < nl && !found; j++)
                found = lens[j] == (uint64_t)size && memcmp(base + at, lit + (j ? lend[j - 1] : 0), (size_t)size) == 0;
        }
        hit[i] = found;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(words);
    PyBuffer_Release(&offsets); PyBuffer_Release(&data); PyBuffer_Release(&literals);
    PyBuffer_Release(&literal_ends); PyBuffer_Release(&out);
    return result;
}

/* decimal_longs(offsets, data, values, ok): for each string data[offsets[i]:offsets[i+1]] (int32 offsets, an Arrow
 * string column's), ok[i] = 1 and values[i] = its value when it is an optional '-' and 1 to 18 ASCII digits (text
 * that Java's Long.parseLong and a plain reading agree on, without overflow), else ok[i] = 0 and values[i] = 0. */
static PyObject *decimal_longs(PyObject *self, PyObject *args) {
    Py_buffer offsets, data, values, ok;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &offsets, &data, &values, &ok)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = offsets.len / 4 - 1;
    const int32_t *o = (const int32_t *)offsets.buf;
    if (n < 0 || values.len != 8 * n || ok.len != n) {
        PyErr_SetString(PyExc_ValueError, "decimal_longs: values and ok must have one item per string");
        goto done;
    }
    if (!strings_inside(o, n, data.len, "decimal_longs")) goto done;
    const uint8_t *base = (const uint8_t *)data.buf;
    int64_t *v = (int64_t *)values.buf;
    uint8_t *good = (uint8_t *)ok.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = o[i], end = o[i + 1];
        int negative = at < end && base[at] == '-';
        at += negative;
        int64_t x = 0;
        uint8_t fine = end - at >= 1 && end - at <= 18;
        for (int64_t p = at; p < end && fine; p++) {
            unsigned d = (unsigned)base[p] - '0';
            fine = d <= 9;
            x = 10 * x + d;
        }
        v[i] = fine ? (negative ? -x : x) : 0;
        good[i] = fine;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&offsets); PyBuffer_Release(&data); PyBuffer_Release(&values); PyBuffer_Release(&ok);
    return result;
}

/* gather_spans(src, starts, ends, dst): dst = src[starts[0]:ends[0]] + src[starts[1]:ends[1]] + ... */
static PyObject *gather_spans(PyObject *self, PyObject *args) {
    Py_buffer src, starts, ends, dst;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &src, &starts, &ends, &dst)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8;
    const int64_t *s = (const int64_t *)starts.buf, *e = (const int64_t *)ends.buf;
    if (ends.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_spans: starts and ends differ in length");
        goto done;
    }
    if (!spans_inside(s, e, n, src.len)) goto done;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) total += (Py_ssize_t)(e[i] - s[i]);
    if (total > dst.len) {
        PyErr_SetString(PyExc_ValueError, "gather_spans: destination too small");
        goto done;
    }
    const char *from = (const char *)src.buf;
    char *to = (char *)dst.buf;
    Py_BEGIN_ALLOW_THREADS
    /* Most spans are short: copy those as 16 fixed bytes (one load and store, the excess overwritten next) where
     * both buffers have them, rather than call memcpy for each. */
    const char *to_slack = (char *)dst.buf + dst.len - 16;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t len = (size_t)(e[i] - s[i]);
        if (len <= 16 && s[i] + 16 <= src.len && to <= to_slack)
            memcpy(to, from + s[i], 16);
        else
            memcpy(to, from + s[i], len);
        to += len;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&src); PyBuffer_Release(&starts); PyBuffer_Release(&ends); PyBuffer_Release(&dst);
    return result;
}

/* gather_records(src, starts, sizes, dst) -> -1, or the index of the first record whose TOTALSIZE (big-endian
 * int32 at its start) differs from its size or whose MAGICCODE (the next 4 bytes) is neither message magic.
 * Copies each record src[starts[i]:starts[i]+sizes[i]] back to back into dst (a pull's response body). */
static PyObject *gather_records(PyObject *self, PyObject *args) {
    Py_buffer src, starts, sizes, dst;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &src, &starts, &sizes, &dst)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8, bad = -1, total = 0;
    const int64_t *s = (const int64_t *)starts.buf, *z = (const int64_t *)sizes.buf;
    if (sizes.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_records: starts and sizes differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || z[i] < 8 || s[i] + z[i] > src.len) {
            PyErr_Format(PyExc_ValueError, "gather_records: record %zd [%lld, +%lld) is outside the buffer of %zd bytes",
                         i, (long long)s[i], (long long)z[i], src.len);
            goto done;
        }
        total += (Py_ssize_t)z[i];
    }
    if (total > dst.len) {
        PyErr_SetString(PyExc_ValueError, "gather_records: destination too small");
        goto done;
    }
    const unsigned char *from = (const unsigned char *)src.buf;
    unsigned char *to = (unsigned char *)dst.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *r = from + s[i];
        uint32_t size = ((uint32_t)r[0] << 24) | ((uint32_t)r[1] << 16) | ((uint32_t)r[2] << 8) | r[3];
        uint32_t magic = ((uint32_t)r[4] << 24) | ((uint32_t)r[5] << 16) | ((uint32_t)r[6] << 8) | r[7];
        if ((int64_t)(int32_t)size != z[i] || (magic != 0xdaa320a7u && magic != 0xdaa320abu)) {
            bad = i;
            break;
        }
        memcpy(to, r, (size_t)z[i]);
        to += z[i];
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(bad);
done:
    PyBuffer_Release(&src); PyBuffer_Release(&starts); PyBuffer_Release(&sizes); PyBuffer_Release(&dst);
    return result;
}

/* message_batch_spans(body, body_starts, body_lengths, props_starts, props_lengths) -> count: walks a
 * MessageBatch body (per message TOTALSIZE i32, MAGICCODE i32, BODYCRC i32, FLAG i32, BODY with an i32 length,
 * PROPERTIES with an i16 length, all big-endian) and writes where each message's body and properties lie. The
 * output arrays (int64) hold at least len(body) / 22 items. ValueError names the first message that does not
 * fit its TOTALSIZE or the body. */
static int64_t batch_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static PyObject *message_batch_spans(PyObject *self, PyObject *args) {
    Py_buffer body, bs, bl, ps, pl;
    if (!PyArg_ParseTuple(args, "y*w*w*w*w*", &body, &bs, &bl, &ps, &pl)) return NULL;
    PyObject *result = NULL;
    const unsigned char *b = (const unsigned char *)body.buf;
    Py_ssize_t len = body.len, cap = bs.len / 8, pos = 0, i = 0;
    if (bl.len / 8 < cap || ps.len / 8 < cap || pl.len / 8 < cap) {
        PyErr_SetString(PyExc_ValueError, "message_batch_spans: output arrays differ in length");
        goto done;
    }
    int64_t *obs = (int64_t *)bs.buf, *obl = (int64_t *)bl.buf, *ops = (int64_t *)ps.buf, *opl = (int64_t *)pl.buf;
    while (pos < len) {
        if (i >= cap || len - pos < 22) {
            PyErr_Format(PyExc_ValueError, "batch message %zd: %zd bytes left, fewer than a message's 22", i, len - pos);
            goto done;
        }
        int64_t total = batch_i32(b + pos), body_len = batch_i32(b + pos + 16);
        if (total < 22 || total > len - pos) {
            PyErr_Format(PyExc_ValueError, "batch message %zd: TOTALSIZE %lld runs past the body", i, (long long)total);
            goto done;
        }
        if (body_len < 0 || 20 + body_len + 2 > total) {
            PyErr_Format(PyExc_ValueError, "batch message %zd: BODY length %lld runs past its TOTALSIZE %lld", i,
                         (long long)body_len, (long long)total);
            goto done;
        }
        const unsigned char *pp = b + pos + 20 + body_len;
        int64_t props_len = (int16_t)(((uint16_t)pp[0] << 8) | pp[1]);
        if (props_len < 0 || 20 + body_len + 2 + props_len > total) {
            PyErr_Format(PyExc_ValueError, "batch message %zd: PROPERTIES length %lld runs past its TOTALSIZE %lld",
                         i, (long long)props_len, (long long)total);
            goto done;
        }
        obs[i] = pos + 20;
        obl[i] = body_len;
        ops[i] = pos + 20 + body_len + 2;
        opl[i] = props_len;
        pos += total;
        i++;
    }
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&body); PyBuffer_Release(&bs); PyBuffer_Release(&bl); PyBuffer_Release(&ps);
    PyBuffer_Release(&pl);
    return result;
}

/* record_spans(body, starts, sizes) -> count: walks records back to back (a pull's body: each record starts
 * with its big-endian TOTALSIZE) and writes where each starts and its size. The outputs (int64) hold at least
 * len(body) / 91 items. ValueError names the first record whose TOTALSIZE is below a record's 91 bytes or runs
 * past the body. */
static PyObject *record_spans(PyObject *self, PyObject *args) {
    Py_buffer body, so, zo;
    if (!PyArg_ParseTuple(args, "y*w*w*", &body, &so, &zo)) return NULL;
    PyObject *result = NULL;
    const unsigned char *b = (const unsigned char *)body.buf;
    Py_ssize_t len = body.len, cap = so.len / 8, pos = 0, i = 0;
    if (zo.len / 8 < cap) {
        PyErr_SetString(PyExc_ValueError, "record_spans: output arrays differ in length");
        goto done;
    }
    int64_t *os = (int64_t *)so.buf, *oz = (int64_t *)zo.buf;
    while (pos < len) {
        int64_t total = len - pos >= 4 ? batch_i32(b + pos) : -1;
        if (i >= cap || total < 91 || total > len - pos) {
            PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: TOTALSIZE %lld is not a record's size within the "
                         "%zd bytes left", i, pos, (long long)total, len - pos);
            goto done;
        }
        os[i] = pos;
        oz[i] = total;
        pos += total;
        i++;
    }
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&body); PyBuffer_Release(&so); PyBuffer_Release(&zo);
    return result;
}

/* Where properties_row writes one row's map, TAGS and KEYS (Arrow buffers, int32 offsets; see
 * properties_columns), and its per-row scratch for the row's kept pairs. */
typedef struct {
    int32_t *mo, *ko, *vo, *tgo, *lko, *kio;
    char *kd, *vd, *tgd, *kid;
    uint8_t *tgv;
    int64_t *ps, *pk, *pe;
    int32_t pairs, items, kpos, vpos, tgpos, kipos;
    int want;  /* WANT_MAP | WANT_TAGS | WANT_KEYS: the columns written (a query may select few of them) */
} props_out;

/* Which scan columns a kernel builds (decode_v4_records' and properties_columns' `want`). */
#define WANT_BODY 1
#define WANT_MAP 2
#define WANT_TAGS 4
#define WANT_KEYS 8
#define WANT_IDS 16
#define WANT_PROPS (WANT_MAP | WANT_TAGS | WANT_KEYS)

static void props_out_init(props_out *o) {
    o->pairs = o->items = o->kpos = o->vpos = o->tgpos = o->kipos = 0;
    if (o->want & WANT_MAP) o->mo[0] = o->ko[0] = o->vo[0] = 0;
    if (o->want & WANT_TAGS) o->tgo[0] = 0;
    if (o->want & WANT_KEYS) o->lko[0] = o->kio[0] = 0;
}

/* Row r's properties text base[p:end]: its kept pairs (as property_pairs keeps them), TAGS and split KEYS. */
static void properties_row(props_out *o, const char *base, int64_t p, int64_t end, Py_ssize_t r) {
    int64_t *ps = o->ps, *pk = o->pk, *pe = o->pe;
    /* the row's kept pairs: start, \x01, end (props_out_scratch leaves room for any row's pairs) */
    Py_ssize_t m = text_pairs(base, p, end, ps, pk, pe, 0, PY_SSIZE_T_MAX);
    int64_t tags_s = -1, tags_e = -1, keys_s = -1, keys_e = -1;
    const int want = o->want;
    for (Py_ssize_t j = 0; j < m; j++) {
        size_t kl = (size_t)(pk[j] - ps[j]), vl = (size_t)(pe[j] - pk[j] - 1);
        if (want & WANT_MAP) {
            memcpy(o->kd + o->kpos, base + ps[j], kl);
            o->kpos += (int32_t)kl;
            memcpy(o->vd + o->vpos, base + pk[j] + 1, vl);
            o->vpos += (int32_t)vl;
            o->pairs++;
            o->ko[o->pairs] = o->kpos;
            o->vo[o->pairs] = o->vpos;
        }
        if (kl == 4 && memcmp(base + ps[j], "TAGS", 4) == 0) { tags_s = pk[j] + 1; tags_e = pe[j]; }
        if (kl == 4 && memcmp(base + ps[j], "KEYS", 4) == 0) { keys_s = pk[j] + 1; keys_e = pe[j]; }
    }
    if (want & WANT_MAP) o->mo[r + 1] = o->pairs;
    if (want & WANT_TAGS) {
        o->tgv[r] = tags_s >= 0;
        if (tags_s >= 0) {
            memcpy(o->tgd + o->tgpos, base + tags_s, (size_t)(tags_e - tags_s));
            o->tgpos += (int32_t)(tags_e - tags_s);
        }
        o->tgo[r + 1] = o->tgpos;
    }
    if (!(want & WANT_KEYS)) return;
    for (int64_t a = keys_s; a >= 0 && a < keys_e;) {
        if (base[a] == ' ') { a++; continue; }
        int64_t b = a;
        while (b < keys_e && base[b] != ' ') b++;
        memcpy(o->kid + o->kipos, base + a, (size_t)(b - a));
        o->kipos += (int32_t)(b - a);
        o->kio[++o->items] = o->kipos;
        a = b;
    }
    o->lko[r + 1] = o->items;
}

/* Parses the output buffers of properties_columns' arguments (from index `first` of args) into o; checks their
 * sizes for n rows and `bytes` bytes of texts. */
static int props_out_parse(PyObject *args, Py_ssize_t first, Py_buffer bufs[11], props_out *o, Py_ssize_t n,
                           int64_t bytes, int want) {
    Py_ssize_t got = 0;
    for (; got < 11; got++) {
        PyObject *item = PyTuple_GetItem(args, first + got);
        if (!item || PyObject_GetBuffer(item, &bufs[got], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) break;
    }
    if (got < 11) {
        for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&bufs[i]);
        return 0;
    }
    const Py_ssize_t cap = n + bytes / 2 + 2;  /* offsets entries for pairs and key items */
    /* map, key, key data, value, value data, tags, tags data, tags valid, keys, key items, key item data */
    Py_ssize_t need[11] = {4 * (n + 1), 4 * cap, bytes, 4 * cap, bytes, 4 * (n + 1), bytes, n, 4 * (n + 1),
                           4 * cap, bytes};
    /* the buffers of a column not wanted are never written: they may be empty */
    static const int column_of[11] = {WANT_MAP, WANT_MAP, WANT_MAP, WANT_MAP, WANT_MAP, WANT_TAGS, WANT_TAGS,
                                      WANT_TAGS, WANT_KEYS, WANT_KEYS, WANT_KEYS};
    for (int i = 0; i < 11; i++)
        if (!(want & column_of[i])) need[i] = 0;
    o->want = want;
    for (int i = 0; i < 11; i++)
        if (bufs[i].len < need[i] || bytes > INT32_MAX) {
            for (int j = 0; j < 11; j++) PyBuffer_Release(&bufs[j]);
            PyErr_SetString(PyExc_ValueError, "properties output buffers too small");
            return 0;
        }
    o->mo = bufs[0].buf; o->ko = bufs[1].buf; o->kd = bufs[2].buf; o->vo = bufs[3].buf; o->vd = bufs[4].buf;
    o->tgo = bufs[5].buf; o->tgd = bufs[6].buf; o->tgv = bufs[7].buf; o->lko = bufs[8].buf; o->kio = bufs[9].buf;
    o->kid = bufs[10].buf;
    return 1;
}

/* Scratch for one row's pairs: a text of at most max_len bytes keeps at most max_len / 3 + 1 pairs. */
static int props_out_scratch(props_out *o, int64_t max_len) {
    size_t per = (size_t)(max_len / 3 + 2);
    o->ps = PyMem_Malloc(sizeof(int64_t) * 3 * per);
    if (!o->ps) {
        PyErr_NoMemory();
        return 0;
    }
    o->pk = o->ps + per;
    o->pe = o->pk + per;
    return 1;
}

/* decode_v4_records(data, starts, offsets, sizes, queue_offsets, queue_ids, topic, want, ints, longs, msg_ids,
 *                   body_offsets, body_data, <properties_columns' 11 outputs>) -> (-1, or the index of the first
 * record this fast path leaves to the general one; pairs; key items).
 * The records at data[starts[i]:][:sizes[i]] (commit-log offsets[i]: a mapped file's records, or a pull's records
 * back to back) of one queue, or of several read in log order (queue_ids: int32, one for every record or one
 * each), all with IPv4 hosts, checked as the numpy
 * decoder checks them (magic, TOTALSIZE, PHYSICALOFFSET, QUEUEID/QUEUEOFFSET, field lengths, TOPIC, and when
 * the bodies are wanted the BODYCRC) in one pass. Outputs, column after column: ints (int32, 4 x n) crc, flag,
 * sys_flag, reconsume_times; longs (int64, 8 x n) born_ts, store_ts, born host and store host (address << 32 |
 * port), body start, body end, properties start, properties end (positions in data); with WANT_IDS, msg_ids
 * (32 x n bytes) the offset message ids in upper-case hex; with WANT_BODY, the bodies back to back as an Arrow
 * binary column (int32 offsets, n + 1, and data with room for all); with WANT_MAP / WANT_TAGS / WANT_KEYS those
 * properties columns as properties_columns writes them; all while each record is in cache (the data buffers
 * sized for sum(sizes - 91 - len(topic)) bytes; those of a column not wanted may be empty). A record with an
 * IPv6 host or that fails a check stops the pass: the caller decodes the run the general way, which names the
 * error. */
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

#define DECODE_PREFETCH 8 /* records ahead: a queue's records are spread over the log, each a few cache lines */

static PyObject *decode_v4_records(PyObject *self, PyObject *args) {
    Py_buffer data, sts, offs, sizes, qoffs, qids, topic, ints, longs, ids, boffs, bdata, outs[11];
    int want;
    props_out po;
    if (PyTuple_GET_SIZE(args) != 24) {
        PyErr_SetString(PyExc_TypeError, "decode_v4_records takes 24 arguments");
        return NULL;
    }
    PyObject *head = PyTuple_GetSlice(args, 0, 13);
    int parsed = head && PyArg_ParseTuple(head, "y*y*y*y*y*y*y*iw*w*w*w*w*", &data, &sts, &offs, &sizes, &qoffs,
                                          &qids, &topic, &want, &ints, &longs, &ids, &boffs, &bdata);
    Py_XDECREF(head);
    if (!parsed) return NULL;
    PyObject *result = NULL;
    int have_outs = 0;
    po.ps = NULL;
    Py_ssize_t n = offs.len / 8, stop = -1;
    const int body = want & WANT_BODY, props = want & WANT_PROPS, want_ids = want & WANT_IDS;
    const Py_ssize_t nq = qids.len / 4;
    if (sizes.len / 8 != n || qoffs.len / 8 != n || sts.len / 8 != n || (nq != 1 && nq != n) ||
        ints.len / 4 < 4 * n || longs.len / 8 < 8 * n || (want_ids && ids.len < 32 * n) || (body && boffs.len / 4 < n + 1)) {
        PyErr_SetString(PyExc_ValueError, "decode_v4_records: inconsistent buffer sizes");
        goto done;
    }
    const uint8_t *buf = (const uint8_t *)data.buf, *tp = (const uint8_t *)topic.buf;
    const int64_t *off = (const int64_t *)offs.buf, *size = (const int64_t *)sizes.buf;
    const int64_t *st = (const int64_t *)sts.buf;
    po.pairs = po.items = 0;
    if (props) {
        int64_t room = 0;
        for (Py_ssize_t i = 0; i < n; i++) room += size[i] > 91 + topic.len ? size[i] - 91 - topic.len : 0;
        if (!(have_outs = props_out_parse(args, 13, outs, &po, n, room, props)) || !props_out_scratch(&po, 32767))
            goto done;
        props_out_init(&po);
    }
    const int64_t *qoff = (const int64_t *)qoffs.buf;
    const int32_t *qid = (const int32_t *)qids.buf;
    const int64_t len = (int64_t)data.len, tlen = (int64_t)topic.len;
    int32_t *crc_o = (int32_t *)ints.buf, *flag_o = crc_o + n, *sys_o = flag_o + n, *rec_o = sys_o + n;
    int64_t *born_ts_o = (int64_t *)longs.buf, *store_ts_o = born_ts_o + n, *born_o = store_ts_o + n;
    int64_t *store_o = born_o + n, *body_s = store_o + n, *body_e = body_s + n, *prop_s = body_e + n;
    int64_t *prop_e = prop_s + n;
    uint8_t *id_o = (uint8_t *)ids.buf, *bd = (uint8_t *)bdata.buf;
    int32_t *bo = (int32_t *)boffs.buf;
    const int64_t bcap = (int64_t)bdata.len;
    int64_t bpos = 0;
    static const char hex[] = "0123456789ABCDEF";
    Py_BEGIN_ALLOW_THREADS
    if (body) bo[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
#if defined(__GNUC__) || defined(__clang__)
        if (i + DECODE_PREFETCH < n) {
            int64_t a = st[i + DECODE_PREFETCH], z = a + size[i + DECODE_PREFETCH];
            if (a >= 0 && z <= len)
                for (int64_t c = a; c < z; c += 64) __builtin_prefetch(buf + c);
        }
#endif
        const int64_t rel = st[i], total = size[i], rec_end = rel + total;
        if (rel < 0 || total < 91 || rec_end > len) { stop = i; break; }  /* 88-byte header + lengths */
        const uint8_t *r = buf + rel;
        uint32_t magic = be32(r + 4);
        uint32_t sys_flag = be32(r + 36);
        if ((int64_t)(int32_t)be32(r) != total || (magic != 0xDAA320A7u && magic != 0xDAA320ABu) ||
            (int64_t)be64(r + 28) != off[i] || (int32_t)be32(r + 12) != qid[nq == 1 ? 0 : i] ||
            (int64_t)be64(r + 20) != qoff[i] || (sys_flag & 0x30)) { stop = i; break; }
        int64_t body_len = (int32_t)be32(r + 84);
        int64_t body_pos = rel + 88, tpos = body_pos + body_len;
        int v2 = magic == 0xDAA320ABu;
        if (body_len < 0 || tpos + (v2 ? 2 : 1) > rec_end) { stop = i; break; }
        int64_t topic_len = v2 ? (int64_t)(int16_t)((buf[tpos] << 8) | buf[tpos + 1]) : buf[tpos];
        int64_t topic_pos = tpos + (v2 ? 2 : 1), plen_pos = topic_pos + topic_len;
        if (topic_len != tlen || plen_pos + 2 > rec_end || memcmp(buf + topic_pos, tp, (size_t)tlen)) {
            stop = i; break;
        }
        int64_t props_len = (int16_t)((buf[plen_pos] << 8) | buf[plen_pos + 1]);
        if (props_len < 0 || plen_pos + 2 + props_len != rec_end) { stop = i; break; }
        int32_t crc = (int32_t)be32(r + 8);
        if (body && (bpos + body_len > bcap || bpos + body_len > INT32_MAX)) { stop = i; break; }
        if (body) {
            memcpy(bd + bpos, buf + body_pos, (size_t)body_len);
            bpos += body_len;
            bo[i + 1] = (int32_t)bpos;
        }
        if (props) properties_row(&po, (const char *)buf, plen_pos + 2, rec_end, i);
        crc_o[i] = crc;
        flag_o[i] = (int32_t)be32(r + 16);
        sys_o[i] = (int32_t)sys_flag;
        rec_o[i] = (int32_t)be32(r + 72);
        born_ts_o[i] = (int64_t)be64(r + 40);
        store_ts_o[i] = (int64_t)be64(r + 56);
        born_o[i] = (int64_t)(((uint64_t)be32(r + 48) << 32) | be32(r + 52));
        store_o[i] = (int64_t)(((uint64_t)be32(r + 64) << 32) | be32(r + 68));
        body_s[i] = body_pos;
        body_e[i] = tpos;
        prop_s[i] = plen_pos + 2;
        prop_e[i] = rec_end;
        if (!want_ids) continue;
        /* address (4), port (4, big-endian), commit-log offset (8, big-endian): 16 bytes -> 32 hex digits */
        uint8_t raw[16];
        memcpy(raw, r + 64, 8);
        uint64_t o = (uint64_t)off[i];
        for (int k = 0; k < 8; k++) raw[8 + k] = (uint8_t)(o >> (56 - 8 * k));
        uint8_t *d = id_o + 32 * i;
        for (int k = 0; k < 16; k++) {
            d[2 * k] = (uint8_t)hex[raw[k] >> 4];
            d[2 * k + 1] = (uint8_t)hex[raw[k] & 15];
        }
    }
    if (body) {  /* BODYCRC over the copied bodies (contiguous now) */
        Py_ssize_t done_n = stop < 0 ? n : stop;
        for (Py_ssize_t i = 0; i < done_n; i++)
            if ((int64_t)body_crc(bd + bo[i], (size_t)(bo[i + 1] - bo[i])) != crc_o[i]) {
                stop = i;  /* the caller decodes the run the general way */
                break;
            }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nnn", stop, (Py_ssize_t)po.pairs, (Py_ssize_t)po.items);
done:
    PyMem_Free(po.ps);
    if (have_outs)
        for (int i = 0; i < 11; i++) PyBuffer_Release(&outs[i]);
    PyBuffer_Release(&data); PyBuffer_Release(&sts); PyBuffer_Release(&offs); PyBuffer_Release(&sizes);
    PyBuffer_Release(&qoffs); PyBuffer_Release(&qids); PyBuffer_Release(&topic); PyBuffer_Release(&ints);
    PyBuffer_Release(&longs); PyBuffer_Release(&ids);
    PyBuffer_Release(&boffs); PyBuffer_Release(&bdata);
    return result;
}

/* properties_columns(data, starts, ends, want, map_offsets, key_offsets, key_data, value_offsets, value_data,
 *                    tags_offsets, tags_data, tags_valid, keys_offsets, key_item_offsets, key_item_data)
 * -> (pairs, key items).
 * Only the columns in `want` (WANT_MAP | WANT_TAGS | WANT_KEYS) are written; the others' buffers may be empty.
 * Row r's properties text is data[starts[r]:ends[r]] (int64 positions). Writes, as Arrow buffers (int32
 * offsets), the scan's three columns that come from it: the map<string,string> (pairs as property_pairs keeps
 * them: one per key, a later value in the earlier one's place), the TAGS value (tags_valid[r] = 0 where there is
 * none) and the KEYS value split at spaces with empty parts dropped (an empty list where there is none). Offsets
 * arrays hold n + 1 (rows) or n + bytes / 2 + 2 (pairs, key items) entries, data buffers as many bytes as the
 * texts hold together. */
static PyObject *properties_columns(PyObject *self, PyObject *args) {
    Py_buffer tdata, starts, ends, outs[11];
    props_out o;
    int want;
    if (PyTuple_GET_SIZE(args) != 15) {
        PyErr_SetString(PyExc_TypeError, "properties_columns takes 15 arguments");
        return NULL;
    }
    PyObject *head = PyTuple_GetSlice(args, 0, 4);
    int parsed = head && PyArg_ParseTuple(head, "y*y*y*i", &tdata, &starts, &ends, &want);
    Py_XDECREF(head);
    if (!parsed) return NULL;
    PyObject *result = NULL;
    int have_outs = 0;
    o.ps = NULL;
    Py_ssize_t n = starts.len / 8;
    const int64_t *ts = (const int64_t *)starts.buf, *te = (const int64_t *)ends.buf;
    int64_t bytes = 0, longest = 0;
    if (ends.len / 8 != n || !spans_inside(ts, te, n, tdata.len)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "properties_columns: starts and ends differ");
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        bytes += te[r] - ts[r];
        longest = te[r] - ts[r] > longest ? te[r] - ts[r] : longest;
    }
    if (!(have_outs = props_out_parse(args, 4, outs, &o, n, bytes, want & WANT_PROPS)) ||
        !props_out_scratch(&o, longest))
        goto done;
    const char *base = (const char *)tdata.buf;
    Py_BEGIN_ALLOW_THREADS
    props_out_init(&o);
    for (Py_ssize_t r = 0; r < n; r++) {
#if defined(__GNUC__) || defined(__clang__)
        /* The texts may lie far apart (in the mapped log): fetch a few rows ahead. */
        if (r + DECODE_PREFETCH < n)
            for (int64_t c = ts[r + DECODE_PREFETCH]; c < te[r + DECODE_PREFETCH]; c += 64)
                __builtin_prefetch(base + c);
#endif
        properties_row(&o, base, ts[r], te[r], r);
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nn", (Py_ssize_t)o.pairs, (Py_ssize_t)o.items);
done:
    PyMem_Free(o.ps);
    if (have_outs)
        for (int i = 0; i < 11; i++) PyBuffer_Release(&outs[i]);
    PyBuffer_Release(&tdata); PyBuffer_Release(&starts); PyBuffer_Release(&ends);
    return result;
}


/* pull_records(units, keep, cl, cl_base, max_msgs, max_bytes, first_fits, clear_mask) -> (body, taken, last, bad): a pull's
 * answer decided and gathered in one pass (RocketMQ's getMessage for one consume-queue file). units: the queue's
 * 20-byte big-endian units (commitlog offset i64, size i32, tags code i64) from the pull's offset; keep: one byte
 * per unit (0: refused by the tag filter) or None; cl: the commitlog file holding the first unit's record, cl_base
 * its first offset. Walks the units up to the first empty one (a unit being written), takes the kept ones while
 * fewer than max_msgs are taken and their bytes fit max_bytes (the first always fits when first_fits), and stops
 * at a record outside cl (in the next commitlog file: the caller goes on there). Each record's TOTALSIZE and MAGICCODE are
 * checked against its unit; clear_mask is ANDed into the high byte of its SYSFLAG (the store's own bits). body:
 * the records back to back (bytes); taken: how many; last: the index of the unit after the last one examined;
 * bad: -1, or the index of the unit whose record did not match (nothing is returned then but bad). */
/* records ahead whose cache lines the gather asks for: a queue's records lie among the other queues', a few
 * kilobytes apart, and the copy otherwise waits on each one's misses in turn (measured with 8 queues
 * interleaved: 65 -> 59 ns a record) */
#define PULL_PREFETCH 8
static PyObject *pull_records(PyObject *self, PyObject *args) {
    Py_buffer units, cl, keep = {0};
    PyObject *keep_obj;
    long long cl_base, max_msgs, max_bytes;
    int first_fits, clear_mask;
    if (!PyArg_ParseTuple(args, "y*Oy*LLLpi", &units, &keep_obj, &cl, &cl_base, &max_msgs, &max_bytes, &first_fits,
                          &clear_mask))
        return NULL;
    PyObject *result = NULL, *body = NULL;
    Py_ssize_t n = units.len / 20;
    if (keep_obj != Py_None) {
        if (PyObject_GetBuffer(keep_obj, &keep, PyBUF_SIMPLE) < 0) goto done;
        if (keep.len < n) {
            PyErr_SetString(PyExc_ValueError, "pull_records: keep is shorter than units");
            goto done;
        }
    }
    const unsigned char *u = (const unsigned char *)units.buf, *k = (const unsigned char *)keep.buf;
    const unsigned char *c = (const unsigned char *)cl.buf;
    /* first pass: which units, how many bytes */
    Py_ssize_t i = 0, taken = 0, last = 0;
    long long total = 0;
    for (i = 0; i < n; i++) {
        const unsigned char *p = u + 20 * i;
        int64_t off = (int64_t)be64(p);
        int32_t size = (int32_t)batch_i32(p + 8);
        if (size == 0) { last = i; break; }  /* the end of the queue: a unit being written */
        if (taken >= max_msgs) break;  /* a full pull ends at its last message */
        if (k != NULL && !k[i]) continue;
        if ((taken > 0 || !first_fits) && total + size > max_bytes) break;  /* so does one cut by bytes */
        if (size < 8 || off < cl_base || off - cl_base + size > cl.len) { last = i; break; }  /* the next file */
        taken++;
        total += size;
        last = i + 1;
    }
    if (i == n) last = n;  /* every unit examined */
    body = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (body == NULL) goto done;
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(body);
    Py_ssize_t bad = -1, got = 0;
    for (i = 0; i < n && got < taken; i++) {
        const unsigned char *p = u + 20 * i;
#if defined(__GNUC__) || defined(__clang__)
        if (i + PULL_PREFETCH < last) {  /* the lines of a record a few ahead, so its misses overlap this copy */
            const unsigned char *q = p + 20 * PULL_PREFETCH;
            int64_t a = (int64_t)be64(q) - cl_base, z = a + (int32_t)batch_i32(q + 8);
            if ((k == NULL || k[i + PULL_PREFETCH]) && a >= 0 && z <= cl.len)
                for (a &= ~(int64_t)63; a < z; a += 64) __builtin_prefetch(c + a);
        }
#endif
        if (k != NULL && !k[i]) continue;
        int64_t off = (int64_t)be64(p);
        int32_t size = (int32_t)batch_i32(p + 8);
        const unsigned char *r = c + (off - cl_base);
        uint32_t magic = ((uint32_t)r[4] << 24) | ((uint32_t)r[5] << 16) | ((uint32_t)r[6] << 8) | r[7];
        if (batch_i32(r) != size || (magic != 0xdaa320a7u && magic != 0xdaa320abu) || size < 36 + 4) {
            bad = i;
            break;
        }
        memcpy(to, r, (size_t)size);
        to[36] &= (unsigned char)clear_mask;
        to += size;
        got++;
    }
    if (bad >= 0) {
        Py_CLEAR(body);
        result = Py_BuildValue("(OnnN)", Py_None, (Py_ssize_t)0, last, PyLong_FromSsize_t(bad));
    } else {
        result = Py_BuildValue("(Nnnn)", body, taken, last, (Py_ssize_t)-1);
        body = NULL;
    }
done:
    Py_XDECREF(body);
    PyBuffer_Release(&units); PyBuffer_Release(&cl);
    if (keep.obj != NULL) PyBuffer_Release(&keep);
    return result;
}

static PyMethodDef methods[] = {
    {"crc32_spans", crc32_spans, METH_VARARGS, "CRC32 of data[starts[i]:ends[i]] into out[i] (uint32)."},
    {"property_pairs", property_pairs, METH_VARARGS, "Kept key/value pair spans of many properties texts."},
    {"property_columns", property_columns, METH_VARARGS, "String columns of a few wanted keys of many properties texts."},
    {"properties_without", properties_without, METH_VARARGS, "Properties texts without the pairs of some keys."},
    {"strings_in", strings_in, METH_VARARGS, "Which strings of an Arrow string column are among a few literals."},
    {"decimal_longs", decimal_longs, METH_VARARGS, "Plain decimal integers of an Arrow string column."},
    {"gather_spans", gather_spans, METH_VARARGS, "Copy many spans of a buffer back to back."},
    {"message_batch_spans", message_batch_spans, METH_VARARGS, "Where each message of a MessageBatch body lies."},
    {"record_spans", record_spans, METH_VARARGS, "Where each record of a pull's body starts, and its size."},
    {"pull_records", pull_records, METH_VARARGS, "A pull's records decided and gathered from one consume-queue span."},
    {"gather_records", gather_records, METH_VARARGS, "Copy records back to back, checking TOTALSIZE and MAGICCODE."},
    {"decode_v4_records", decode_v4_records, METH_VARARGS, "Fixed fields and spans of many IPv4-host records."},
    {"properties_columns", properties_columns, METH_VARARGS, "Map, TAGS and KEYS columns of many properties texts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    crc32_init();
    return PyModule_Create(&module);
}
