/* RocketMQ's IndexFile, the two loops of the write path (store/index_file.py has the layout):
 *   record_keys  the index entries of many stored records: for each record not a rolled-back half, its
 *                `topic#UNIQ_KEY` and then `topic#key` for each of its space-separated KEYS, hashed as
 *                IndexFile.indexKeyHashMethod does (|String.hashCode()|, 0 for Integer.MIN_VALUE), with the
 *                record's commitlog offset and store timestamp;
 *   walk_keys    the same over the records back to back in a span of a commitlog file (recovery's catch-up);
 *   put_entries  IndexFile.putKey over many entries into one mapped file (its header, slots and entries are
 *                big-endian), until the file is full. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER 40
#define SLOT 4
#define ENTRY 20

static uint32_t rd32(const uint8_t *p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }
static uint64_t rd64(const uint8_t *p) { return ((uint64_t)rd32(p) << 32) | rd32(p + 4); }
static void wr32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)(v >> 32)); wr32(p + 4, (uint32_t)v); }

/* Continues Java's String.hashCode over the UTF-16 units of UTF-8 text (an invalid byte counts as U+FFFD, as
 * Java's decoder replaces it). */
static uint32_t java_hash(uint32_t h, const uint8_t *s, const uint8_t *e) {
    while (s < e && *s < 0x80) h = 31 * h + *s++;  /* ASCII: one unit a byte */
    while (s < e) {
        uint32_t c = *s, cp;
        int n;
        if (c < 0x80) { cp = c; n = 1; }
        else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; n = 2; }
        else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; n = 3; }
        else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; n = 4; }
        else { cp = 0xFFFD; n = 0; }
        if (n > 1) {
            if (s + n > e) { cp = 0xFFFD; n = 0; }
            else for (int k = 1; k < n; k++) {
                if ((s[k] & 0xC0) != 0x80) { cp = 0xFFFD; n = 0; break; }
                cp = (cp << 6) | (s[k] & 0x3F);
            }
        }
        s += n ? n : 1;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    return h;
}

static int32_t key_hash(uint32_t prefix, const uint8_t *s, const uint8_t *e) {
    int32_t h = (int32_t)java_hash(prefix, s, e);
    if (h == INT32_MIN) return 0;
    return h < 0 ? -h : h;
}

typedef struct { int32_t *h; int64_t *o; int64_t *t; Py_ssize_t n, cap; } Entries;

static int add(Entries *x, int32_t h, int64_t o, int64_t t) {
    if (x->n == x->cap) {
        Py_ssize_t cap = x->cap ? x->cap * 2 : 1024;
        int32_t *h2 = PyMem_RawRealloc(x->h, cap * 4);
        if (h2) x->h = h2;
        int64_t *o2 = h2 ? PyMem_RawRealloc(x->o, cap * 8) : NULL;
        if (o2) x->o = o2;
        int64_t *t2 = o2 ? PyMem_RawRealloc(x->t, cap * 8) : NULL;
        if (!t2) return 0;
        x->t = t2;
        x->cap = cap;
    }
    x->h[x->n] = h; x->o[x->n] = o; x->t[x->n] = t; x->n++;
    return 1;
}

/* The entries of the record at r (avail bytes from r on): its total size, or -1 when it is not a record (a
 * blank's magic, a torn or foreign write). */
static int64_t record_entries(const uint8_t *r, int64_t avail, int64_t phy, Entries *x, int *oom) {
    if (avail < 60) return -1;
    int64_t total = (int32_t)rd32(r);
    uint32_t magic = rd32(r + 4);
    if (total < 60 || total > avail || (magic != 0xDAA320A7u && magic != 0xDAA320ABu)) return -1;
    const uint8_t *e = r + total;
    uint32_t sys = rd32(r + 36);
    if ((sys & 0xC) == 0xC) return total; /* TRANSACTION_ROLLBACK_TYPE: RocketMQ does not index it */
    int born = (sys & 0x10) ? 20 : 8, store = (sys & 0x20) ? 20 : 8;
    const uint8_t *p = r + 48 + born;
    if (p + 8 > e) return -1;
    int64_t ts = (int64_t)rd64(p);
    p += 8 + store + 4 + 8;
    if (p + 4 > e) return -1;
    int64_t body = (int32_t)rd32(p);
    p += 4;
    if (body < 0 || p + body + 1 > e) return -1;
    p += body;
    int64_t tl;
    if (magic == 0xDAA320A7u) tl = *p++;
    else { if (p + 2 > e) return -1; tl = (p[0] << 8) | p[1]; p += 2; }
    const uint8_t *topic = p;
    p += tl;
    if (p + 2 > e) return -1;
    int64_t pl = (p[0] << 8) | p[1];
    p += 2;
    if (p + pl != e) return -1;
    uint32_t prefix = 31 * java_hash(0, topic, topic + tl) + '#';
    const uint8_t *uv = NULL, *ue = NULL, *vs = NULL, *ve = NULL;
    for (const uint8_t *q = p; q < e; q++) {  /* one pass over `k\x01v\x02...`: the last UNIQ_KEY and KEYS */
        const uint8_t *ks = q;
        while (q < e && *q != 1) q++;
        if (q >= e) break;
        size_t kl = (size_t)(q - ks);
        const uint8_t *v = ++q;
        while (q < e && *q != 2) q++;
        if (kl == 8 && memcmp(ks, "UNIQ_KEY", 8) == 0) { uv = v; ue = q; }
        else if (kl == 4 && memcmp(ks, "KEYS", 4) == 0) { vs = v; ve = q; }
    }
    if (uv && !add(x, key_hash(prefix, uv, ue), phy, ts)) { *oom = 1; return total; }
    if (vs) {
        while (vs < ve) {
            const uint8_t *sp = memchr(vs, ' ', (size_t)(ve - vs));
            if (!sp) sp = ve;
            if (sp > vs && !add(x, key_hash(prefix, vs, sp), phy, ts)) { *oom = 1; return total; }
            vs = sp + 1;
        }
    }
    return total;
}

static PyObject *entries_result(Entries *x, int oom, Py_ssize_t stop) {
    PyObject *out = NULL;
    if (oom) PyErr_NoMemory();
    else out = Py_BuildValue("(y#y#y#n)", (char *)x->h, x->n * 4, (char *)x->o, x->n * 8, (char *)x->t, x->n * 8, stop);
    PyMem_RawFree(x->h); PyMem_RawFree(x->o); PyMem_RawFree(x->t);
    return out;
}

/* record_keys(data, starts, phys) -> (hashes int32 bytes, offsets int64 bytes, store timestamps int64 bytes, bad):
 * the entries of the records at data[starts[i]:] (commitlog offsets phys[i]); bad is the index of the first
 * record that does not parse (-1 when all do), where the entries stop. */
static PyObject *record_keys(PyObject *self, PyObject *args) {
    Py_buffer data, starts, phys;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &starts, &phys)) return NULL;
    Py_ssize_t n = starts.len / 8, bad = -1;
    const int64_t *st = starts.buf, *ph = phys.buf;
    Entries x = {0};
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !oom; i++) {
        if (st[i] < 0 || st[i] > data.len ||
            record_entries((const uint8_t *)data.buf + st[i], data.len - st[i], ph[i], &x, &oom) < 0) { bad = i; break; }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&phys);
    return entries_result(&x, oom, bad);
}

/* walk_keys(data, start, limit, base) -> (hashes, offsets, timestamps, stop): the entries of the records back to
 * back in data[start:limit] (data's byte 0 is commitlog offset base); stop is where the walk ended (limit, or
 * the first byte that does not start a record: a file's blank end, the log's end). */
static PyObject *walk_keys(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t pos, limit;
    long long base;
    if (!PyArg_ParseTuple(args, "y*nnL", &data, &pos, &limit, &base)) return NULL;
    if (limit > data.len) limit = data.len;
    Entries x = {0};
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    while (pos < limit && !oom) {
        int64_t total = record_entries((const uint8_t *)data.buf + pos, limit - pos, base + pos, &x, &oom);
        if (total < 0) break;
        pos += total;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return entries_result(&x, oom, pos);
}

/* put_entries(buf, slot_num, index_num, hashes, offsets, timestamps, first) -> the first entry not written
 * (len(hashes) when all were): IndexFile.putKey for entries first.. while the file's index count is below
 * index_num. Each entry is written before its slot, the header after all of them: a reader never counts an entry
 * not yet written, and a writer killed in the middle leaves slots pointing at written entries
 * (IndexFile.repair_slots follows them back). */
static PyObject *put_entries(PyObject *self, PyObject *args) {
    Py_buffer buf, hs, os_, ts;
    long long slots, num;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "w*LLy*y*y*n", &buf, &slots, &num, &hs, &os_, &ts, &i)) return NULL;
    Py_ssize_t n = hs.len / 4;
    PyObject *out = NULL;
    if (slots <= 0 || num <= 0 || buf.len < HEADER + slots * SLOT + num * ENTRY || os_.len / 8 != n || ts.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "put_entries: the file is smaller than its slots and entries");
        goto done;
    }
    uint8_t *b = buf.buf;
    const int32_t *h = hs.buf;
    const int64_t *o = os_.buf, *t = ts.buf;
    Py_BEGIN_ALLOW_THREADS
    int64_t begin_ts = (int64_t)rd64(b), begin_phy = (int64_t)rd64(b + 16);
    int32_t count = (int32_t)rd32(b + 36), used = (int32_t)rd32(b + 32);
    if (count <= 0) count = 1;
    Py_ssize_t last = -1;
    for (; i < n && count < num; i++) {
        if (i + 16 < n) __builtin_prefetch(b + HEADER + (int64_t)(h[i + 16] % slots) * SLOT, 1);  /* a random slot */
        uint8_t *slot = b + HEADER + (int64_t)(h[i] % slots) * SLOT;
        int32_t prev = (int32_t)rd32(slot);
        if (prev <= 0 || prev > count) prev = 0;
        int64_t diff = (t[i] - begin_ts) / 1000;
        if (begin_ts <= 0 || diff < 0) diff = 0;
        else if (diff > INT32_MAX) diff = INT32_MAX;
        uint8_t *e = b + HEADER + slots * SLOT + (int64_t)count * ENTRY;
        wr32(e, (uint32_t)h[i]);
        wr64(e + 4, (uint64_t)o[i]);
        wr32(e + 12, (uint32_t)diff);
        wr32(e + 16, (uint32_t)prev);
        __asm__ __volatile__("" ::: "memory");  /* the entry's bytes before the slot that points at it */
        wr32(slot, (uint32_t)count);
        if (count <= 1) {
            begin_ts = t[i];
            begin_phy = o[i];
        }
        if (prev == 0) used++;
        count++;
        last = i;
    }
    if (last >= 0) {
        wr64(b, (uint64_t)begin_ts);
        wr64(b + 16, (uint64_t)begin_phy);
        wr64(b + 8, (uint64_t)t[last]);
        wr64(b + 24, (uint64_t)o[last]);
        wr32(b + 32, (uint32_t)used);
        wr32(b + 36, (uint32_t)count);
    }
    Py_END_ALLOW_THREADS
    out = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&hs);
    PyBuffer_Release(&os_);
    PyBuffer_Release(&ts);
    return out;
}

static PyMethodDef methods[] = {
    {"record_keys", record_keys, METH_VARARGS, "Index entries (hash, offset, store time) of many stored records."},
    {"walk_keys", walk_keys, METH_VARARGS, "Index entries of the records back to back in a commitlog span."},
    {"put_entries", put_entries, METH_VARARGS, "IndexFile.putKey over many entries into one mapped file."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index", NULL, -1, methods};

PyMODINIT_FUNC PyInit__index(void) { return PyModule_Create(&module); }
