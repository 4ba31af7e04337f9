/* The few loops over record bytes that have no vector form in numpy or Arrow, each done for a whole batch in
 * one call and without the GIL:
 *   crc32_spans   RocketMQ's BODYCRC of many bodies (zlib has no batched form and costs ~0.4 us a call);
 *   property_pairs the key/value spans of many RocketMQ properties texts (`k\x01v\x02...`);
 *   property_columns the string columns of a few wanted keys of many properties texts (what a filter reads);
 *   strings_in    which strings of a column equal one of a few constants (a filter's = and IN);
 *   decimal_longs the plain decimal integers of a string column (a filter's numeric comparisons);
 *   gather_spans  many byte spans copied back to back (the data of an Arrow binary/string column). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static uint32_t T[8][256];

static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        T[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++) T[k][i] = (T[k - 1][i] >> 8) ^ T[0][T[k - 1][i] & 0xFF];
}

static int little_endian(void) {
    uint16_t x = 1;
    return *(uint8_t *)&x == 1;
}

static uint32_t crc32_span(const uint8_t *p, size_t len, int le) {
    uint32_t c = 0xFFFFFFFFu;
    if (le) {
        while (len >= 8) {
            uint32_t lo, hi;
            memcpy(&lo, p, 4);
            memcpy(&hi, p + 4, 4);
            lo ^= c;
            c = T[7][lo & 0xFF] ^ T[6][(lo >> 8) & 0xFF] ^ T[5][(lo >> 16) & 0xFF] ^ T[4][lo >> 24] ^
                T[3][hi & 0xFF] ^ T[2][(hi >> 8) & 0xFF] ^ T[1][(hi >> 16) & 0xFF] ^ T[0][hi >> 24];
            p += 8;
            len -= 8;
        }
    }
    while (len--) c = T[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
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
    int le = little_endian();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) o[i] = crc32_span(base + s[i], (size_t)(e[i] - s[i]), le);
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
    for (Py_ssize_t r = 0; r < n && !overflow; r++) {
        int64_t p = s[r], end = e[r];
        Py_ssize_t row_first = count;
        while (p < end) {
            const char *q = memchr(base + p, 2, (size_t)(end - p));
            int64_t pair_end = q ? (int64_t)(q - base) : end;
            const char *k = memchr(base + p, 1, (size_t)(pair_end - p));
            if (k) {
                int64_t sep = (int64_t)(k - base);
                if (sep > p && sep < pair_end - 1) {
                    /* A key seen before in this row: the later pair wins, in the earlier one's place (a map, as
                     * Java's HashMap.put and Python's dict keep it). Rows hold a handful of pairs. */
                    Py_ssize_t j = row_first;
                    for (; j < count; j++)
                        if (so[j] - ko[j] == sep - p && memcmp(base + ko[j], base + p, (size_t)(sep - p)) == 0)
                            break;
                    if (j == count) {
                        if (count >= cap) { overflow = 1; break; }
                        count++;
                    }
                    ro[j] = r; ko[j] = p; so[j] = sep; eo[j] = pair_end;
                }
            }
            p = pair_end + 1;
        }
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

static PyMethodDef methods[] = {
    {"crc32_spans", crc32_spans, METH_VARARGS, "CRC32 of data[starts[i]:ends[i]] into out[i] (uint32)."},
    {"property_pairs", property_pairs, METH_VARARGS, "Kept key/value pair spans of many properties texts."},
    {"property_columns", property_columns, METH_VARARGS, "String columns of a few wanted keys of many properties texts."},
    {"strings_in", strings_in, METH_VARARGS, "Which strings of an Arrow string column are among a few literals."},
    {"decimal_longs", decimal_longs, METH_VARARGS, "Plain decimal integers of an Arrow string column."},
    {"gather_spans", gather_spans, METH_VARARGS, "Copy many spans of a buffer back to back."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    init_tables();
    return PyModule_Create(&module);
}
