/* One pass that encodes a whole put_batch into CommitLog records, back to back, in RocketMQ's byte layout:
 * header fields from numpy arrays (big-endian), BODYCRC computed while the body is copied, topic from a small
 * table, and the properties text assembled from its pieces (user text, then `NAME\x01value\x02` for each named
 * column whose value is not empty). store/record_encoder.py wraps it and has a numpy/Arrow fallback that gives
 * the same bytes.
 * The CRC32 (PCLMULQDQ when the CPU has it) is in rmq_common/crc32.h, shared with rmq_common/_native.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define MAGIC_V1 0xDAA320A7u
#define BLANK_MAGIC 0xCBD43194u
#define MAGIC_V2 0xDAA320ABu
#define BORNHOST_V6 0x10
#define STOREHOST_V6 0x20
#define MAX_PARTS 8

/* ---- CRC32 ------------------------------------------------------------------------------------------- */

#include "crc32.h"

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Span2;

/* ---- stores ----------------------------------------------------------------------------------------- */

static inline uint8_t *put32(uint8_t *o, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
    memcpy(o, &v, 4);
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    memcpy(o, &v, 4);
#else
    o[0] = (uint8_t)(v >> 24); o[1] = (uint8_t)(v >> 16); o[2] = (uint8_t)(v >> 8); o[3] = (uint8_t)v;
#endif
    return o + 4;
}

static inline uint8_t *put64(uint8_t *o, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
    memcpy(o, &v, 8);
    return o + 8;
#else
    return put32(put32(o, (uint32_t)(v >> 32)), (uint32_t)v);
#endif
}

/* memcpy for the short fields (tags, keys, topic, ...) without a call: two overlapping fixed-size moves. */
static inline uint8_t *put_bytes(uint8_t *o, const uint8_t *s, size_t n) {
    if (n > 32) {
        memcpy(o, s, n);
    } else if (n >= 16) {
        uint8_t a[16], b[16];
        memcpy(a, s, 16); memcpy(b, s + n - 16, 16);
        memcpy(o, a, 16); memcpy(o + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8); memcpy(&b, s + n - 8, 8);
        memcpy(o, &a, 8); memcpy(o + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4); memcpy(&b, s + n - 4, 4);
        memcpy(o, &a, 4); memcpy(o + n - 4, &b, 4);
    } else if (n) {
        uint8_t a = s[0], b = s[n / 2], c = s[n - 1];
        o[0] = a; o[n / 2] = b; o[n - 1] = c;
    }
    return o + n;
}

/* Eight upper-case hex digits of v (a byte's two digits per lookup). */
static uint8_t hex_pairs[256][2];

static void init_hex_pairs(void) {
    static const char digits[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        hex_pairs[b][0] = (uint8_t)digits[b >> 4];
        hex_pairs[b][1] = (uint8_t)digits[b & 0xF];
    }
}

static inline void put_hex32(uint8_t *d, uint32_t v) {
    memcpy(d, hex_pairs[v >> 24], 2);
    memcpy(d + 2, hex_pairs[(v >> 16) & 0xFF], 2);
    memcpy(d + 4, hex_pairs[(v >> 8) & 0xFF], 2);
    memcpy(d + 6, hex_pairs[v & 0xFF], 2);
}

/* ---- the batch --------------------------------------------------------------------------------------- */

/* A record's bytes besides its body, topic and properties text: TOTALSIZE through BODYLENGTH and the
 * PROPERTIESLENGTH field, with the born and store host addresses of hosts_len bytes together (8, 20 or 32). */
static inline int64_t fixed_record_bytes(int64_t hosts_len) {
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8 + 4 + hosts_len + 2;
}

/* Bytes a properties piece adds for a value of v bytes: the raw text as is (head_len 0), else NAME\x01value\x02
 * with head NAME\x01 of head_len bytes, nothing for an empty value. */
static inline int64_t piece_bytes(int64_t v, int64_t head_len) {
    return head_len == 0 ? v : (v > 0 ? head_len + v + 1 : 0);
}

/* How a properties piece holds its values. */
enum { PART_COLUMN = 0, PART_BROADCAST = 1, PART_IDS = 2 };
#define ID_HEAD_LEN 24 /* a generated id: 24 fixed hex digits, then 8 of a counter */
#define ID_LEN 32

typedef struct {
    Py_buffer head, offsets, data;  /* head empty: raw text (the user's properties), copied as is */
    int kind;                       /* PART_COLUMN: offsets[n+1] into data; PART_BROADCAST: one value for every
                                     * message (offsets has 2 entries); PART_IDS: message i's value is data (the
                                     * id head) and the low 32 bits of counter + i in hex (offsets unused) */
    long long counter;
} Part;

static const int32_t ID_OFFSETS[2] = {0, ID_LEN}; /* a PART_IDS piece's values are all ID_LEN bytes long */

typedef struct { /* a Part's pointers, for the per-record loops */
    const uint8_t *head, *data;
    const int32_t *offsets;
    Py_ssize_t head_len, stride; /* stride 0: the same length for every message */
    int ids;                     /* PART_IDS */
    uint32_t counter;
} Piece;

typedef struct {
    Py_ssize_t n;
    Py_buffer body_offsets, body_data, topics, topic_offsets, topic_index;
    Py_ssize_t s_ti; /* topic_index's stride: 0 when it is one index for every message */
    Part parts[MAX_PARTS];
    Piece pieces[MAX_PARTS];
    Py_ssize_t nparts, ntopics;
    PyObject *seq;
} Columns;

/* Byte length of element i of an int32-offsets column, -1 when the offsets are out of the data. */
static inline int64_t span(const int32_t *off, Py_ssize_t i, Py_ssize_t data_len) {
    int32_t a = off[i], b = off[i + 1];
    return (a < 0 || b < a || b > data_len) ? -1 : (int64_t)(b - a);
}

static int need(Py_buffer *b, Py_ssize_t bytes, const char *name) {
    if (b->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, needs %zd", name, b->len, bytes);
        return 0;
    }
    return 1;
}

/* A column of n items of `item` bytes (stride 1), or of one item for every message (stride 0). */
static int per_message(Py_buffer *b, Py_ssize_t n, Py_ssize_t item, const char *name, Py_ssize_t *stride) {
    if (b->len >= n * item) {
        *stride = 1;
        return 1;
    }
    if (b->len == item) {
        *stride = 0;
        return 1;
    }
    return need(b, n * item, name);
}

static void columns_release(Columns *c) {
    for (Py_ssize_t k = 0; k < c->nparts; k++) {
        PyBuffer_Release(&c->parts[k].head);
        PyBuffer_Release(&c->parts[k].offsets);
        PyBuffer_Release(&c->parts[k].data);
    }
    Py_XDECREF(c->seq);
    Py_buffer *held[] = {&c->body_offsets, &c->body_data, &c->topics, &c->topic_offsets, &c->topic_index};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++)
        if (held[k]->obj != NULL) PyBuffer_Release(held[k]);
}

/* The first row i in [lo, hi) whose span off[i]..off[i+1] is not inside data_len bytes, or -1. Offsets that
 * start at or above 0, never decrease and end within the data put every span inside: one branch-free pass (the
 * compiler vectorises it), the row found only when something is wrong. */
static Py_ssize_t bad_span(const int32_t *off, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t data_len) {
    if (hi <= lo) return -1;
    int bad = off[lo] < 0 || off[hi] > data_len;
    for (Py_ssize_t i = lo; i < hi; i++) bad |= off[i + 1] < off[i];
    if (!bad) return -1;
    for (Py_ssize_t i = lo; i < hi; i++)
        if (span(off, i, data_len) < 0) return i;
    return lo; /* not reached: some span is bad when the pass says so */
}

/* The columns every record takes its variable parts from: body_offsets int32[n+1] into body_data; topics: the
 * topics' UTF-8 bytes back to back, topic_offsets int64[T+1], topic_index int32[n] (or [1], for all); parts: a
 * sequence of (head, int32 offsets, data, kind, counter) (see Part). Buffers the caller has already parsed are
 * passed in; rows [lo, hi) are checked. */
static int columns_check(Columns *c, PyObject *parts_obj, Py_ssize_t lo, Py_ssize_t hi) {
    Py_ssize_t n = c->n;
    c->ntopics = c->topic_offsets.len / 8 - 1;
    if (!need(&c->body_offsets, (n + 1) * 4, "body_offsets") ||
        !per_message(&c->topic_index, n, 4, "topic_index", &c->s_ti))
        return 0;
    if (c->ntopics < 1) {
        PyErr_SetString(PyExc_ValueError, "no topics");
        return 0;
    }
    const int64_t *tof = (const int64_t *)c->topic_offsets.buf;
    for (Py_ssize_t t = 0; t < c->ntopics; t++) {
        if (tof[t] < 0 || tof[t + 1] < tof[t] || tof[t + 1] > c->topics.len || tof[t + 1] - tof[t] > 32767) {
            PyErr_Format(PyExc_ValueError, "topic %zd is outside the topics buffer", t);
            return 0;
        }
    }
    c->seq = PySequence_Fast(parts_obj, "parts must be a sequence");
    if (c->seq == NULL) return 0;
    if (PySequence_Fast_GET_SIZE(c->seq) > MAX_PARTS) {
        PyErr_SetString(PyExc_ValueError, "too many properties parts");
        return 0;
    }
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(c->seq); k++) {
        Part *pt = &c->parts[c->nparts];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(c->seq, k), "y*y*y*iL", &pt->head, &pt->offsets, &pt->data,
                              &pt->kind, &pt->counter))
            return 0;
        c->nparts++;
        Piece *pc = &c->pieces[k];
        pc->head = (const uint8_t *)pt->head.buf;
        pc->head_len = pt->head.len;
        pc->data = (const uint8_t *)pt->data.buf;
        pc->ids = pt->kind == PART_IDS;
        pc->counter = (uint32_t)pt->counter;
        if (pt->kind == PART_IDS) {
            if (pt->data.len != ID_HEAD_LEN || pt->head.len == 0) {
                PyErr_SetString(PyExc_ValueError, "generated ids need a name and a 24-byte head");
                return 0;
            }
            pc->offsets = ID_OFFSETS;
            pc->stride = 0;
            continue;
        }
        if (pt->kind != PART_COLUMN && pt->kind != PART_BROADCAST) {
            PyErr_Format(PyExc_ValueError, "unknown properties part kind %d", pt->kind);
            return 0;
        }
        int broadcast = pt->kind == PART_BROADCAST;
        if (!need(&pt->offsets, (broadcast ? 2 : n + 1) * 4, "a properties part's offsets")) return 0;
        pc->offsets = (const int32_t *)pt->offsets.buf;
        pc->stride = broadcast ? 0 : 1;
        Py_ssize_t bad = broadcast ? bad_span(pc->offsets, 0, 1, pt->data.len)
                                   : bad_span(pc->offsets, lo, hi, pt->data.len);
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "message %zd: properties offsets are outside their data", bad);
            return 0;
        }
    }
    const int32_t *ti = (const int32_t *)c->topic_index.buf;
    Py_ssize_t bad = bad_span((const int32_t *)c->body_offsets.buf, lo, hi, c->body_data.len);
    uint32_t topic_bad = 0;
    if (c->s_ti == 0) {
        topic_bad = hi > lo && (uint32_t)ti[0] >= (uint32_t)c->ntopics;
    } else {
        for (Py_ssize_t i = lo; i < hi; i++) topic_bad |= (uint32_t)ti[i] >= (uint32_t)c->ntopics;
    }
    if (bad < 0 && topic_bad)
        for (bad = lo; (uint32_t)ti[bad * c->s_ti] < (uint32_t)c->ntopics; bad++) {}
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "message %zd: body offsets or topic index out of range", bad);
        return 0;
    }
    return 1;
}


/* The first of n texts (int32 offsets o[n+1] into p, checked) holding \x01 or \x02, RocketMQ's properties
 * separators, or -1. */
static Py_ssize_t separator_row(const int32_t *o, Py_ssize_t n, const uint8_t *p) {
    if (n <= 0) return -1;
    const uint8_t *one = memchr(p + o[0], 1, (size_t)(o[n] - o[0]));
    const uint8_t *two = memchr(p + o[0], 2, (size_t)((one ? one - p : o[n]) - o[0]));
    Py_ssize_t hit = two ? two - p : one ? one - p : -1;
    if (hit < 0) return -1;
    Py_ssize_t lo = 0, hi = n - 1; /* the last text that starts at or before hit */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi + 1) / 2;
        if (o[mid] <= hit) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* record_sizes(sizes, hosts_len, max_body, body_offsets, body_data, topics, topic_offsets, topic_index, parts)
 *   -> (first message whose properties exceed 32767 bytes, first message whose body exceeds max_body bytes,
 * first message with \x01 or \x02 in a named piece's value, that piece; each -1 when there is none; the sizes'
 * sum). sizes: int64[n] out; hosts_len: the born and store addresses' bytes together (8,
 * 20 or 32). */
static PyObject *record_sizes(PyObject *self, PyObject *args) {
    Py_buffer sizes;
    Py_ssize_t hosts_len;
    long long max_body;
    PyObject *parts_obj, *result = NULL;
    Columns c;
    memset(&c, 0, sizeof c);
    if (!PyArg_ParseTuple(args, "w*nLy*y*y*y*y*O", &sizes, &hosts_len, &max_body, &c.body_offsets, &c.body_data,
                          &c.topics, &c.topic_offsets, &c.topic_index, &parts_obj))
        return NULL;
    Py_ssize_t n = c.n = sizes.len / 8;
    if (!columns_check(&c, parts_obj, 0, n)) goto done;
    /* Every column part's bytes per message into sizes (a loop per part, each vectorises), the parts with one
     * value for all as one constant; then one pass adds the fixed fields, body and topic, and checks. */
    int64_t *sz = (int64_t *)sizes.buf, same_for_all = 0;
    int started = 0;
    for (Py_ssize_t k = 0; k < c.nparts; k++) {
        const Piece *pc = &c.pieces[k];
        const int32_t *off = pc->offsets;
        int64_t head = pc->head_len;
        if (pc->stride == 0) {
            same_for_all += piece_bytes(off[1] - off[0], head);
        } else if (!started) {
            for (Py_ssize_t i = 0; i < n; i++) sz[i] = piece_bytes(off[i + 1] - off[i], head);
            started = 1;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) sz[i] += piece_bytes(off[i + 1] - off[i], head);
        }
    }
    if (!started) memset(sz, 0, (size_t)n * 8);
    Py_ssize_t too_long = -1, too_big = -1, sep_row = -1, sep_part = -1;
    for (Py_ssize_t k = 0; k < c.nparts && sep_row < 0; k++) { /* values may not hold the separators */
        const Piece *pc = &c.pieces[k];
        if (pc->head_len == 0 || pc->ids) continue; /* the user's text is made of them; ids are hex */
        sep_row = separator_row(pc->offsets, pc->stride ? n : 1, pc->data);
        if (sep_row >= 0) sep_part = k;
    }
    if (sep_row >= 0 && c.pieces[sep_part].stride == 0) sep_row = 0;
    const int32_t *bo = (const int32_t *)c.body_offsets.buf, *ti = (const int32_t *)c.topic_index.buf;
    const int64_t *tof = (const int64_t *)c.topic_offsets.buf;
    const int64_t fixed = fixed_record_bytes(hosts_len);
    int64_t longest = 0, longest_props = 0;
    long long total = 0;
    if (c.ntopics == 1) { /* the usual batch: one topic for all */
        int64_t t_len = tof[1] - tof[0], head = fixed + (t_len > 127 ? 2 : 1) + t_len;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t props = sz[i] + same_for_all, body = bo[i + 1] - bo[i];
            longest_props = props > longest_props ? props : longest_props;
            longest = body > longest ? body : longest;
            sz[i] = head + body + props;
            total += sz[i];
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            int32_t t = ti[i * c.s_ti];
            int64_t t_len = tof[t + 1] - tof[t], props = sz[i] + same_for_all, body = bo[i + 1] - bo[i];
            longest_props = props > longest_props ? props : longest_props;
            longest = body > longest ? body : longest;
            sz[i] = fixed + (t_len > 127 ? 2 : 1) + t_len + body + props;
            total += sz[i];
        }
    }
    if (longest > max_body)
        for (too_big = 0; bo[too_big + 1] - bo[too_big] <= max_body; too_big++) {}
    if (longest_props > 32767) { /* which message: its properties are its size less everything else */
        for (too_long = 0; too_long < n; too_long++) {
            int32_t t = ti[too_long * c.s_ti];
            int64_t t_len = tof[t + 1] - tof[t];
            if (sz[too_long] - fixed - (t_len > 127 ? 2 : 1) - t_len - (bo[too_long + 1] - bo[too_long]) > 32767)
                break;
        }
    }
    result = Py_BuildValue("nnnnL", too_long, too_big, sep_row, sep_part, total);
done:
    columns_release(&c);
    PyBuffer_Release(&sizes);
    return result;
}

/* The fixed fields of a batch's records: int64[n] sizes, queue_offsets, physical_offsets, born_timestamps,
 * prepared_offsets; int32[n] queue_ids, flags, sys_flags, reconsume_times (these six may also hold one value,
 * for every message); hosts: BORNHOST through STOREHOST as
 * the batch has them (born address + port, STORETIMESTAMP, store address + port), of which the born address
 * takes born_len (4 or 16) bytes. */
typedef struct {
    Py_buffer sizes, qid, flg, qoff, poff, sysf, bts, rec, prep, hosts;
    Py_ssize_t born_len;
    int32_t v6_bits; /* SYSFLAG's IPv6 bits, as every record must have them for the host addresses' lengths */
    /* 1, or 0 where the column is one value for every message: queue_ids, flags, sys_flags, born_timestamps,
     * reconsume_times, prepared_offsets */
    Py_ssize_t s_qid, s_flg, s_sysf, s_bts, s_rec, s_prep;
} Fixed;

#define FIXED_FORMAT "y*y*y*y*y*y*y*y*y*y*n"
#define FIXED_ARGS(f) &(f).sizes, &(f).qid, &(f).flg, &(f).qoff, &(f).poff, &(f).sysf, &(f).bts, &(f).rec, \
    &(f).prep, &(f).hosts, &(f).born_len

static void fixed_release(Fixed *f) {
    Py_buffer *held[] = {&f->sizes, &f->qid, &f->flg, &f->qoff, &f->poff, &f->sysf, &f->bts, &f->rec, &f->prep,
                         &f->hosts};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++)
        if (held[k]->obj != NULL) PyBuffer_Release(held[k]);
}

static int fixed_check(Fixed *f, Py_ssize_t n) {
    if (!per_message(&f->qid, n, 4, "queue_ids", &f->s_qid) || !per_message(&f->flg, n, 4, "flags", &f->s_flg) ||
        !need(&f->qoff, n * 8, "queue_offsets") || !need(&f->poff, n * 8, "physical_offsets") ||
        !per_message(&f->sysf, n, 4, "sys_flags", &f->s_sysf) ||
        !per_message(&f->bts, n, 8, "born_timestamps", &f->s_bts) ||
        !per_message(&f->rec, n, 4, "reconsume_times", &f->s_rec) ||
        !per_message(&f->prep, n, 8, "prepared_offsets", &f->s_prep))
        return 0;
    Py_ssize_t store_len = f->hosts.len - f->born_len - 16;
    if ((f->born_len != 4 && f->born_len != 16) || (store_len != 4 && store_len != 16)) {
        PyErr_SetString(PyExc_ValueError, "host addresses must be 4 or 16 bytes");
        return 0;
    }
    f->v6_bits = (f->born_len == 16 ? BORNHOST_V6 : 0) | (store_len == 16 ? STOREHOST_V6 : 0);
    return 1;
}

/* Copies len bytes from p to dst and returns their BODYCRC (body_crc(p, len)). */
static inline uint32_t body_crc_copy(uint8_t *dst, const uint8_t *p, size_t len) {
#ifdef HAVE_CLMUL_CODE
    if (use_clmul && len >= CRC_CLMUL_MIN) {
        size_t bulk = len & ~(size_t)15, rest = len - bulk;
        uint32_t state = crc_clmul_copy(0xFFFFFFFFu, p, dst, bulk);
        if (rest) memcpy(dst + len - 16, p + len - 16, 16); /* the tail, overlapping bytes already copied */
        return (crc_tables(state, p + bulk, rest) ^ 0xFFFFFFFFu) & 0x7FFFFFFFu;
    }
#endif
    memcpy(dst, p, len);
    return body_crc(p, len);
}

/* encode_rows' body; one_for_all (a constant where it is inlined): topic, flag, sys_flag, born timestamp,
 * reconsume times and prepared offset are one value for every message, read once into registers. */
__attribute__((always_inline)) static inline Py_ssize_t
encode_rows_as(const Columns *c, const Fixed *f, Py_ssize_t first, Py_ssize_t last, uint8_t *out, Py_ssize_t room,
               const char **error, Py_ssize_t *bad, const int one_for_all) {
    if (first >= last) return 0; /* the columns may be empty: nothing below may be read */
    const int64_t *sz = (const int64_t *)f->sizes.buf, *qo = (const int64_t *)f->qoff.buf;
    const int64_t *po = (const int64_t *)f->poff.buf, *bt = (const int64_t *)f->bts.buf;
    const int64_t *pr = (const int64_t *)f->prep.buf;
    const int32_t *qi = (const int32_t *)f->qid.buf, *fl = (const int32_t *)f->flg.buf;
    const int32_t *sf = (const int32_t *)f->sysf.buf, *rc = (const int32_t *)f->rec.buf;
    const int32_t *bo = (const int32_t *)c->body_offsets.buf, *ti = (const int32_t *)c->topic_index.buf;
    const int64_t *tof = (const int64_t *)c->topic_offsets.buf;
    const uint8_t *body_base = (const uint8_t *)c->body_data.buf, *topic_base = (const uint8_t *)c->topics.buf;
    const uint8_t *host_bytes = (const uint8_t *)f->hosts.buf;
    const Py_ssize_t hosts_total = f->hosts.len, topics_len = c->topics.len, nparts = c->nparts;
    const int32_t v6_bits = f->v6_bits;
    const Py_ssize_t s_ti = c->s_ti, s_qid = f->s_qid, s_flg = f->s_flg, s_sysf = f->s_sysf, s_bts = f->s_bts,
                     s_rec = f->s_rec, s_prep = f->s_prep;
    /* the values for all, when one_for_all (the stores through o, bytes, could alias the arrays) */
    const int32_t ti0 = ti[0], fl0 = fl[0], sf0 = sf[0], rc0 = rc[0];
    const int64_t bt0 = bt[0], pr0 = pr[0];
    /* hosts holds both addresses and, between them, the born port, STORETIMESTAMP and the store port (16 bytes) */
    const int64_t fixed = fixed_record_bytes(hosts_total - 16);
    /* The pieces in locals (stores through o, bytes, could otherwise alias them and make the compiler load
     * them again for every record), their heads (NAME\x01) padded to 16 bytes so that one 16-byte move writes
     * one. */
    struct {
        const uint8_t *data;
        const int32_t *offsets;
        Py_ssize_t stride, head_len, data_len;
        const uint8_t *head;
        uint8_t head16[16];
        int ids;
        uint32_t counter;
    } pcs[MAX_PARTS];
    for (Py_ssize_t k = 0; k < nparts; k++) {
        const Piece *pc = &c->pieces[k];
        pcs[k].data = pc->data;
        pcs[k].offsets = pc->offsets;
        pcs[k].stride = pc->stride;
        pcs[k].head_len = pc->head_len;
        pcs[k].data_len = c->parts[k].data.len;
        pcs[k].head = pc->head;
        pcs[k].ids = pc->ids;
        pcs[k].counter = pc->counter;
        memset(pcs[k].head16, 0, 16);
        if (pc->head_len <= 16) memcpy(pcs[k].head16, pc->head, (size_t)pc->head_len);
    }
    uint8_t *o = out, *end = out + room;
    for (Py_ssize_t i = first; i < last; i++) {
        int64_t props_len = 0;
        for (Py_ssize_t k = 0; k < nparts; k++) {
            const int32_t *off = pcs[k].offsets + i * pcs[k].stride;
            props_len += piece_bytes(off[1] - off[0], pcs[k].head_len);
        }
        int32_t t = one_for_all ? ti0 : ti[i * s_ti];
        int64_t topic_start = tof[t], topic_len = tof[t + 1] - topic_start;
        int32_t body_len = bo[i + 1] - bo[i];
        int64_t total = fixed + body_len + (topic_len > 127 ? 2 : 1) + topic_len + props_len;
        int32_t sys_flag = one_for_all ? sf0 : sf[i * s_sysf];
        if (__builtin_expect((sys_flag & (BORNHOST_V6 | STOREHOST_V6)) != v6_bits || props_len > 32767 ||
                             total != sz[i] || end - o < total, 0)) {
            *bad = i;
            if ((sys_flag & (BORNHOST_V6 | STOREHOST_V6)) != v6_bits)
                *error = "SYSFLAG's IPv6 bits do not match the host address lengths";
            else if (props_len > 32767)
                *error = "properties are longer than 32767 bytes";
            else if (total != sz[i])
                *error = "a record's size differs from the planned size";
            else
                *error = "the output buffer is too small";
            return -1;
        }
        /* Short values are written with 16-byte moves that may run past them, into bytes written next: every
         * such move stays inside the record (rec_end) and reads inside its source. */
        uint8_t *rec_end = o + total;
        put32(o, (uint32_t)total);
        put32(o + 4, topic_len > 127 ? MAGIC_V2 : MAGIC_V1);
        put32(o + 12, (uint32_t)qi[i * s_qid]);
        put32(o + 16, (uint32_t)(one_for_all ? fl0 : fl[i * s_flg]));
        put64(o + 20, (uint64_t)qo[i]);
        put64(o + 28, (uint64_t)po[i]);
        put32(o + 36, (uint32_t)sys_flag);
        put64(o + 40, (uint64_t)(one_for_all ? bt0 : bt[i * s_bts]));
        uint8_t *crc_at = o + 8;
        o += 48;
        if (hosts_total == 24) { /* IPv4 both: a fixed-size copy */
            memcpy(o, host_bytes, 24);
            o += 24;
        } else {
            o = put_bytes(o, host_bytes, (size_t)hosts_total);
        }
        put32(o, (uint32_t)(one_for_all ? rc0 : rc[i * s_rec]));
        put64(o + 4, (uint64_t)(one_for_all ? pr0 : pr[i * s_prep]));
        put32(o + 12, (uint32_t)body_len);
        o += 16;
        put32(crc_at, body_crc_copy(o, body_base + bo[i], (size_t)body_len));
        o += body_len;
        if (topic_len > 127) *o++ = (uint8_t)(topic_len >> 8);
        *o++ = (uint8_t)topic_len;
        if (topic_len <= 16 && topics_len - topic_start >= 16 && rec_end - o >= 16)
            memcpy(o, topic_base + topic_start, 16);
        else
            put_bytes(o, topic_base + topic_start, (size_t)topic_len);
        o += topic_len;
        *o++ = (uint8_t)(props_len >> 8);
        *o++ = (uint8_t)props_len;
        for (Py_ssize_t k = 0; k < nparts; k++) {
            const int32_t *off = pcs[k].offsets + i * pcs[k].stride;
            size_t len = (size_t)(off[1] - off[0]);
            const uint8_t *s = pcs[k].data + off[0];
            Py_ssize_t head = pcs[k].head_len;
            if (head == 0) {
                o = put_bytes(o, s, len);
                continue;
            }
            if (len == 0) continue;
            if (head <= 16 && rec_end - o >= 16) memcpy(o, pcs[k].head16, 16);
            else put_bytes(o, pcs[k].head, (size_t)head);
            o += head;
            if (pcs[k].ids) { /* a generated id: its head, then the counter */
                memcpy(o, pcs[k].data, ID_HEAD_LEN);
                put_hex32(o + ID_HEAD_LEN, pcs[k].counter + (uint32_t)i);
                o += ID_LEN;
                *o++ = 2;
                continue;
            }
            Py_ssize_t readable = pcs[k].data_len - off[0], writable = rec_end - o;
            if (len <= 16 && readable >= 16 && writable >= 16) {
                memcpy(o, s, 16);
            } else if (len <= 32 && readable >= 32 && writable >= 32) {
                memcpy(o, s, 16);
                memcpy(o + 16, s + 16, 16);
            } else {
                put_bytes(o, s, len);
            }
            o += len;
            *o++ = 2;
        }
    }
    return o - out;
}

/* Records [first, last) back to back into out (room bytes). Returns the bytes written, or -1 with *error and
 * *bad (the message) set. Needs no GIL. The usual batch (one topic, and one flag, sys_flag, born timestamp,
 * reconsume times and prepared offset for all) takes a copy of the loop made for it. */
static Py_ssize_t encode_rows(const Columns *c, const Fixed *f, Py_ssize_t first, Py_ssize_t last, uint8_t *out,
                              Py_ssize_t room, const char **error, Py_ssize_t *bad) {
    if (c->s_ti == 0 && f->s_flg == 0 && f->s_sysf == 0 && f->s_bts == 0 && f->s_rec == 0 && f->s_prep == 0)
        return encode_rows_as(c, f, first, last, out, room, error, bad, 1);
    return encode_rows_as(c, f, first, last, out, room, error, bad, 0);
}

#define COLUMNS_FORMAT "y*y*y*y*y*O"
#define COLUMNS_ARGS(c, parts) &(c).body_offsets, &(c).body_data, &(c).topics, &(c).topic_offsets, \
    &(c).topic_index, &(parts)

/* encode_batch(out, first, count, <columns>, <fixed>) -> bytes written: records first .. first+count-1 of the
 * batch back to back from the start of out. <columns> as for record_sizes (body_offsets, body_data, topics,
 * topic_offsets, topic_index, parts); <fixed>: sizes, queue_ids, flags, queue_offsets, physical_offsets,
 * sys_flags, born_timestamps, reconsume_times, prepared_offsets, hosts, born_len (see Fixed). Every record's
 * size is checked against sizes[i] before it is written. */
static PyObject *encode_batch(PyObject *self, PyObject *args) {
    Py_buffer out;
    Py_ssize_t first, count;
    PyObject *parts_obj, *result = NULL;
    Columns c;
    Fixed f;
    memset(&c, 0, sizeof c);
    memset(&f, 0, sizeof f);
    if (!PyArg_ParseTuple(args, "w*nn" COLUMNS_FORMAT FIXED_FORMAT, &out, &first, &count,
                          COLUMNS_ARGS(c, parts_obj), FIXED_ARGS(f)))
        return NULL;
    Py_ssize_t n = c.n = f.sizes.len / 8, last = first + count;
    if (first < 0 || count < 0 || last > n) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: rows out of range");
        goto done;
    }
    if (!columns_check(&c, parts_obj, first, last) || !fixed_check(&f, n)) goto done;
    const char *error = NULL;
    Py_ssize_t bad = 0, written;
    Py_BEGIN_ALLOW_THREADS
    written = encode_rows(&c, &f, first, last, (uint8_t *)out.buf, out.len, &error, &bad);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_Format(PyExc_ValueError, "encode_batch: message %zd: %s", bad, error);
        goto done;
    }
    result = PyLong_FromSsize_t(written);
done:
    columns_release(&c);
    fixed_release(&f);
    PyBuffer_Release(&out);
    return result;
}

/* ---- encoding and writing, overlapped ---------------------------------------------------------------- */

typedef struct {
    int fd;
    int64_t pos;       /* where the records go in the file */
    Py_ssize_t first, last;
    int32_t blank;     /* > 0: an end-of-file record of this many remaining bytes follows the records */
} Segment;

typedef struct { /* one encoded chunk on its way to the file */
    int fd;
    int64_t pos;
    const uint8_t *data;
    size_t len;
} Job;

#define RING 3

/* The hand-over between the encoding thread and the writer: counters, not a mutex and condition variable.
 * Both sides wait by spinning (pause, and a sched_yield every 64 turns so a busy core is given up): a wait
 * lasts one chunk's encode or pwrite, tens of microseconds, while waking a thread that sleeps on a condition
 * variable costs about as much on a virtual machine, once per chunk (with a mutex the thread gained nothing
 * on two cores; with counters it does where it runs at all). */
typedef struct {
    Job jobs[RING];
    long published, done;   /* chunks handed over / written; jobs[done % RING] is the next to write */
    int closed;
    int error; /* errno of a failed write; no more writes after it */
} Writer;

static int write_all(int fd, const uint8_t *p, size_t len, int64_t pos) {
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)pos);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (w == 0) return EIO;
        p += w;
        len -= (size_t)w;
        pos += w;
    }
    return 0;
}

static inline void relax(unsigned *spins) {
    if (++*spins & 63) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

/* None, or NULL with OSError for a failed write's errno. */
static PyObject *none_or_oserror(int err) {
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static void *writer_main(void *arg) {
    Writer *w = arg;
    for (;;) {
        unsigned spins = 0;
        long done = w->done, published;
        while ((published = __atomic_load_n(&w->published, __ATOMIC_ACQUIRE)) == done &&
               !__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE))
            relax(&spins);
        if (published == done && __atomic_load_n(&w->published, __ATOMIC_ACQUIRE) == done) break;
        Job job = w->jobs[done % RING];
        int err = w->error ? w->error : write_all(job.fd, job.data, job.len, job.pos);
        if (err && !w->error) __atomic_store_n(&w->error, err, __ATOMIC_RELEASE);
        __atomic_store_n(&w->done, done + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Hands a chunk to the writer thread (or writes it here without one); waits while the ring is full. */
static void submit(Writer *w, int threaded, int fd, int64_t pos, const uint8_t *data, size_t len) {
    if (!threaded) {
        if (!w->error) w->error = write_all(fd, data, len, pos);
        return;
    }
    unsigned spins = 0;
    while (w->published - __atomic_load_n(&w->done, __ATOMIC_ACQUIRE) >= RING) relax(&spins);
    Job *job = &w->jobs[w->published % RING];
    job->fd = fd; job->pos = pos; job->data = data; job->len = len;
    __atomic_store_n(&w->published, w->published + 1, __ATOMIC_RELEASE);
}

/* Waits until at most pending_max chunks are still to be written (a slot is free again). */
static void wait_free(Writer *w, int threaded, int pending_max) {
    if (!threaded) return;
    unsigned spins = 0;
    while (w->published - __atomic_load_n(&w->done, __ATOMIC_ACQUIRE) > pending_max) relax(&spins);
}

/* write_batch(segments, chunk, threaded, <columns>, <fixed>): encode the batch's records and write them where
 * the CommitLog planned them. segments: (fd, file position, first, last, blank) per run of records in one file;
 * blank > 0 writes an end-of-file record of that length right after them. Records are encoded about chunk
 * bytes at a time, each chunk written (pwrite) while it is still in cache; with threaded, a second thread
 * writes the previous chunks while the next is encoded, so encoding and copying into the page cache overlap
 * when a core is free for it. Chunks and segments are written in order. Raises OSError if a write fails (what
 * was written before stays). */
static PyObject *write_batch(PyObject *self, PyObject *args) {
    PyObject *seg_obj, *parts_obj, *result = NULL, *seg_seq = NULL;
    Py_ssize_t chunk;
    int want_thread;
    Columns c;
    Fixed f;
    memset(&c, 0, sizeof c);
    memset(&f, 0, sizeof f);
    if (!PyArg_ParseTuple(args, "Onp" COLUMNS_FORMAT FIXED_FORMAT, &seg_obj, &chunk, &want_thread,
                          COLUMNS_ARGS(c, parts_obj), FIXED_ARGS(f)))
        return NULL;
    Segment *segs = NULL;
    uint8_t *bufs = NULL;
    Py_ssize_t n = c.n = f.sizes.len / 8, nsegs = 0;
    if (!columns_check(&c, parts_obj, 0, n) || !fixed_check(&f, n)) goto done;
    seg_seq = PySequence_Fast(seg_obj, "write_batch: segments must be a sequence");
    if (seg_seq == NULL) goto done;
    nsegs = PySequence_Fast_GET_SIZE(seg_seq);
    segs = PyMem_Calloc((size_t)(nsegs ? nsegs : 1), sizeof(Segment));
    if (segs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *sz = (const int64_t *)f.sizes.buf;
    int64_t largest = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (sz[i] > largest) largest = sz[i];
    for (Py_ssize_t k = 0; k < nsegs; k++) {
        Segment *g = &segs[k];
        long long pos;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seg_seq, k), "iLnni", &g->fd, &pos, &g->first, &g->last,
                              &g->blank))
            goto done;
        g->pos = pos;
        if (g->first < 0 || g->last < g->first || g->last > n || g->pos < 0 || g->blank < 0) {
            PyErr_Format(PyExc_ValueError, "write_batch: segment %zd is out of range", k);
            goto done;
        }
    }
    Py_ssize_t room = chunk > largest ? chunk : (Py_ssize_t)largest;
    bufs = PyMem_Malloc((size_t)room * RING + 8 * (size_t)(nsegs ? nsegs : 1));
    if (bufs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint8_t *blanks = bufs + (size_t)room * RING;
    const char *error = NULL;
    Py_ssize_t bad = 0;
    Writer w;
    memset(&w, 0, sizeof w);
    int threaded = 0;
    Py_BEGIN_ALLOW_THREADS
    /* A thread only when there is something to overlap: more than one chunk. */
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) total += sz[i];
    pthread_t thread;
    if (want_thread && total > chunk && pthread_create(&thread, NULL, writer_main, &w) == 0) threaded = 1;
    int slot = 0;
    for (Py_ssize_t k = 0; k < nsegs && !error && !__atomic_load_n(&w.error, __ATOMIC_ACQUIRE); k++) {
        Segment *g = &segs[k];
        int64_t pos = g->pos;
        Py_ssize_t a = g->first;
        while (a < g->last && !__atomic_load_n(&w.error, __ATOMIC_ACQUIRE)) {
            Py_ssize_t b = a;
            int64_t bytes = 0;
            while (b < g->last && (b == a || bytes + sz[b] <= chunk)) bytes += sz[b++];
            wait_free(&w, threaded, RING - 1); /* slot's previous chunk is written */
            uint8_t *buf = bufs + (size_t)slot * (size_t)room;
            Py_ssize_t len = encode_rows(&c, &f, a, b, buf, room, &error, &bad);
            if (len < 0) break;
            submit(&w, threaded, g->fd, pos, buf, (size_t)len);
            if (threaded) slot = (slot + 1) % RING; /* alone: the one buffer, still in cache */
            pos += len;
            a = b;
        }
        if (g->blank > 0 && !error) {
            uint8_t *blank = blanks + 8 * k;
            put32(put32(blank, (uint32_t)g->blank), BLANK_MAGIC);
            submit(&w, threaded, g->fd, pos, blank, 8);
        }
    }
    if (threaded) {
        __atomic_store_n(&w.closed, 1, __ATOMIC_RELEASE);
        pthread_join(thread, NULL);
    }
    Py_END_ALLOW_THREADS
    if (error) {
        PyErr_Format(PyExc_ValueError, "write_batch: message %zd: %s", bad, error);
        goto done;
    }
    result = none_or_oserror(w.error);
done:
    PyMem_Free(segs);
    PyMem_Free(bufs);
    Py_XDECREF(seg_seq);
    columns_release(&c);
    fixed_release(&f);
    return result;
}

/* Parses (offsets, data, out) of a per-text function: int32 offsets[n+1] into data, out with n items of
 * itemsize bytes, every span inside data. Releases the buffers itself when it fails. */
static int column_and_out(PyObject *args, Py_buffer *off, Py_buffer *data, Py_buffer *out, Py_ssize_t itemsize,
                          const char *name, Py_ssize_t *n) {
    if (!PyArg_ParseTuple(args, "y*y*w*", off, data, out)) return 0;
    *n = out->len / itemsize;
    int ok = need(off, (*n + 1) * 4, "offsets");
    for (Py_ssize_t i = 0; ok && i < *n; i++)
        if (span((const int32_t *)off->buf, i, data->len) < 0) {
            PyErr_Format(PyExc_ValueError, "%s: text %zd is outside the data", name, i);
            ok = 0;
        }
    if (!ok) {
        PyBuffer_Release(off);
        PyBuffer_Release(data);
        PyBuffer_Release(out);
    }
    return ok;
}

static void release_column_and_out(Py_buffer *off, Py_buffer *data, Py_buffer *out) {
    PyBuffer_Release(off);
    PyBuffer_Release(data);
    PyBuffer_Release(out);
}

/* body_crcs(offsets, data, out): out[i] = BODYCRC of data[offsets[i]:offsets[i+1]] (int32 offsets, int32 out). */
static PyObject *body_crcs(PyObject *self, PyObject *args) {
    Py_buffer off, data, out;
    Py_ssize_t n;
    if (!column_and_out(args, &off, &data, &out, 4, "body_crcs", &n)) return NULL;
    const int32_t *bo = (const int32_t *)off.buf;
    int32_t *o = (int32_t *)out.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        o[i] = (int32_t)body_crc((const uint8_t *)data.buf + bo[i], (size_t)(bo[i + 1] - bo[i]));
    release_column_and_out(&off, &data, &out);
    Py_RETURN_NONE;
}

/* Java's String.hashCode() of the UTF-8 text [p, e) (31-multiplier over UTF-16 code units, so a character
 * outside the BMP counts twice), sign-extended into *out. Returns 0 when the text is cut inside a character. */
static inline int java_hash(const uint8_t *p, const uint8_t *e, int64_t *out) {
    uint32_t h = 0;
    /* four ASCII characters at a time: h*31^4 + a*31^3 + b*31^2 + c*31 + d, a shorter multiply chain */
    while (e - p >= 4 && !((p[0] | p[1] | p[2] | p[3]) & 0x80)) {
        h = h * 923521u + p[0] * 29791u + p[1] * 961u + p[2] * 31u + p[3];
        p += 4;
    }
    while (p < e) {
        uint32_t c = *p, extra;
        if (c < 0x80) { p++; h = 31 * h + c; continue; }
        if (c >= 0xF0) { c &= 0x07; extra = 3; }
        else if (c >= 0xE0) { c &= 0x0F; extra = 2; }
        else { c &= 0x1F; extra = 1; }
        if ((Py_ssize_t)extra >= e - p) return 0;
        for (uint32_t k = 1; k <= extra; k++) c = (c << 6) | (p[k] & 0x3F);
        p += extra + 1;
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    *out = (int64_t)(int32_t)h;
    return 1;
}

/* java_hash_codes(offsets, data, out): out[i] = Java's String.hashCode() of the UTF-8 text
 * data[offsets[i]:offsets[i+1]] (int32 offsets), over its UTF-16 code units (a character beyond the BMP counts
 * as its two surrogates), sign-extended into int64; 0 for an empty text. The consume queue's tagsCode. */
static PyObject *java_hash_codes(PyObject *self, PyObject *args) {
    Py_buffer off, data, out;
    Py_ssize_t n;
    if (!column_and_out(args, &off, &data, &out, 8, "java_hash_codes", &n)) return NULL;
    const int32_t *o = (const int32_t *)off.buf;
    const uint8_t *base = (const uint8_t *)data.buf;
    int64_t *h_out = (int64_t *)out.buf;
    Py_ssize_t bad = -1;
    for (Py_ssize_t i = 0; i < n && bad < 0; i++)
        if (!java_hash(base + o[i], base + o[i + 1], &h_out[i])) bad = i;
    release_column_and_out(&off, &data, &out);
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "java_hash_codes: text %zd is not valid UTF-8", bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* hex_ids(out, head, start): row i of out (n rows of len(head) + 8 bytes) = head followed by the low 32 bits of
 * start + i in 8 upper-case hex digits (client-style unique ids). */
static PyObject *hex_ids(PyObject *self, PyObject *args) {
    Py_buffer out, head;
    unsigned long long start;
    if (!PyArg_ParseTuple(args, "w*y*K", &out, &head, &start)) return NULL;
    Py_ssize_t row = head.len + 8, n = row ? out.len / row : 0;
    uint8_t *o = (uint8_t *)out.buf;
    const uint8_t *h = (const uint8_t *)head.buf;
    Py_ssize_t hl = head.len;
    for (Py_ssize_t i = 0; i < n; i++, o += row) {
        if (hl == ID_HEAD_LEN) { /* the client layout: a fixed-size copy */
            memcpy(o, h, ID_HEAD_LEN);
        } else {
            memcpy(o, h, (size_t)hl);
        }
        put_hex32(o + hl, (uint32_t)(start + (unsigned long long)i));
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&head);
    Py_RETURN_NONE;
}

/* first_separator(offsets, data) -> the first row i whose text data[offsets[i]:offsets[i+1]] holds a \x01 or
 * \x02 (RocketMQ's properties separators), or -1. */
static PyObject *first_separator(PyObject *self, PyObject *args) {
    Py_buffer off, data;
    if (!PyArg_ParseTuple(args, "y*y*", &off, &data)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = off.len / 4 - 1;
    const int32_t *o = (const int32_t *)off.buf;
    if (n < 0 || o[0] < 0 || o[n] < o[0] || o[n] > data.len) {
        PyErr_SetString(PyExc_ValueError, "first_separator: offsets are outside the data");
        goto done;
    }
    result = PyLong_FromSsize_t(separator_row(o, n, (const uint8_t *)data.buf));
done:
    PyBuffer_Release(&off);
    PyBuffer_Release(&data);
    return result;
}

/* assign_offsets(sizes, keys, start, ends, write_pos, tags_offsets, tags_data, queue_ids, queue_offsets, positions,
 * units, counts) -> the batch's end in the commitlog. Where a batch goes, in one pass over it: each record's commitlog
 * offset, and its consume queue's queue offset and unit (CommitLog's putMessage and the reput that follows).
 * Groups are the consume queues the batch writes to. keys int32[n]: each message's group, -1 for one not
 * dispatched (a prepared or rolled-back transaction: queue offset 0, no unit); or empty: round robin over the
 * G groups from `start` (message i to group (start + i) % G), the groups written to queue_ids int32[n] (left
 * alone otherwise). ends int64[G]: each group's queue end; message i gets queue offset ends[g] + its place in
 * its group, and its big-endian unit (positions[i], sizes[i], tagsCode) lands in units (uint8[20 * m],
 * m = dispatched messages) with its group's units together in batch order, groups in order. write_pos >= 0:
 * positions (int64[n]) are computed from there, record after record (a batch inside one file); < 0: positions
 * are given (a batch that rolls files). tagsCode: Java's hashCode of message i's tag, tags_offsets int32[n+1]
 * into tags_data (empty offsets: no tags, code 0). counts int64[G]: messages per group, written. sizes,
 * queue_offsets int64[n]. Returns write_pos + the sizes' sum, or -1 when positions were given. */
static PyObject *assign_offsets(PyObject *self, PyObject *args) {
    Py_buffer sizes, keys, ends, tags, tags_data, qids, qo, pos, units, counts;
    long long start_ll, write_pos;
    if (!PyArg_ParseTuple(args, "y*y*Ly*Ly*y*w*w*w*w*w*", &sizes, &keys, &start_ll, &ends, &write_pos, &tags,
                          &tags_data, &qids, &qo, &pos, &units, &counts))
        return NULL;
    PyObject *result = NULL;
    int64_t *cursor = NULL;
    Py_ssize_t n = sizes.len / 8, groups = ends.len / 8, m = units.len / 20;
    int round_robin = keys.len == 0;
    int has_tags = tags.len > 0;
    if ((has_tags && !need(&tags, (n + 1) * 4, "tags_offsets")) || !need(&qo, n * 8, "queue_offsets") ||
        !need(&pos, n * 8, "positions") || !need(&counts, groups * 8, "counts") ||
        (round_robin ? !need(&qids, n * 4, "queue_ids") : !need(&keys, n * 4, "keys")))
        goto done;
    if (groups < 1 || (round_robin && (start_ll < 0 || start_ll >= groups))) {
        PyErr_Format(PyExc_ValueError, "assign_offsets: %zd groups, round robin from %lld", groups, start_ll);
        goto done;
    }
    const int64_t *sz = (const int64_t *)sizes.buf, *e = (const int64_t *)ends.buf;
    const int32_t *t_off = (const int32_t *)tags.buf;
    const uint8_t *t_data = (const uint8_t *)tags_data.buf;
    if (has_tags) {
        Py_ssize_t bad = bad_span(t_off, 0, n, tags_data.len);
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "assign_offsets: message %zd: tags offsets are outside their data", bad);
            goto done;
        }
    }
    int32_t *k = round_robin ? (int32_t *)qids.buf : (int32_t *)keys.buf;
    int64_t *q = (int64_t *)qo.buf, *p = (int64_t *)pos.buf, *c = (int64_t *)counts.buf;
    uint8_t *u = (uint8_t *)units.buf;
    cursor = PyMem_Malloc(2 * (size_t)groups * sizeof(int64_t));
    if (cursor == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *first = cursor + groups; /* where each group's units start */
    memset(c, 0, (size_t)groups * 8);
    if (round_robin) {
        Py_ssize_t g = (Py_ssize_t)start_ll;
        for (Py_ssize_t i = 0; i < n; i++) {
            k[i] = (int32_t)g;
            if (++g == groups) g = 0;
        }
        Py_ssize_t turns = n / groups, rest = n % groups;
        for (Py_ssize_t j = 0; j < groups; j++) c[j] = turns + (((j - start_ll + groups) % groups) < rest);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (k[i] >= groups) {
                PyErr_Format(PyExc_ValueError, "assign_offsets: key %d of message %zd is not below %zd", k[i], i,
                             groups);
                goto done;
            }
            if (k[i] >= 0) c[k[i]]++;
        }
    }
    int64_t placed = 0;
    for (Py_ssize_t j = 0; j < groups; j++) {
        first[j] = cursor[j] = placed;
        placed += c[j];
    }
    if (placed != m) {
        PyErr_Format(PyExc_ValueError, "assign_offsets: %lld dispatched messages for %zd units", (long long)placed, m);
        goto done;
    }
    int64_t at = write_pos;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (write_pos >= 0) {
            p[i] = at;
            at += sz[i];
        }
        int32_t g = k[i];
        if (g < 0) {
            q[i] = 0;
            continue;
        }
        int64_t j = cursor[g]++, code = 0;
        q[i] = e[g] + (j - first[g]); /* its place in its group counts on from the queue's end */
        if (has_tags && !java_hash(t_data + t_off[i], t_data + t_off[i + 1], &code)) {
            PyErr_Format(PyExc_ValueError, "assign_offsets: message %zd: the tag is not valid UTF-8", i);
            goto done;
        }
        put64(put32(put64(u + 20 * j, (uint64_t)p[i]), (uint32_t)sz[i]), (uint64_t)code);
    }
    result = PyLong_FromLongLong(write_pos >= 0 ? at : -1);
done:
    PyMem_Free(cursor);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&tags);
    PyBuffer_Release(&tags_data);
    PyBuffer_Release(&qids);
    PyBuffer_Release(&qo);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&units);
    PyBuffer_Release(&counts);
    return result;
}

/* write_units(writes, units): consume-queue units to their files. units: writable bytes, 20 per unit; writes:
 * (fd, file position, first unit, count) per run of one queue's units in one file. Each run is written with
 * its first unit's size zeroed and that size after, so a reader in another process, which ends a queue at the
 * first zero size, sees the run's units all at once or not at all (ConsumeQueue.put_units). units comes back
 * as it went in. Raises OSError if a write fails. */
typedef struct { int fd; long long pos; Py_ssize_t first, count; } UnitRun;

static PyObject *write_units(PyObject *self, PyObject *args) {
    PyObject *runs_obj, *seq = NULL, *result = NULL;
    Py_buffer units;
    if (!PyArg_ParseTuple(args, "Ow*", &runs_obj, &units)) return NULL;
    UnitRun *runs = NULL;
    Py_ssize_t m = units.len / 20;
    seq = PySequence_Fast(runs_obj, "write_units: writes must be a sequence");
    if (seq == NULL) goto done;
    Py_ssize_t nruns = PySequence_Fast_GET_SIZE(seq);
    runs = PyMem_Malloc((size_t)(nruns ? nruns : 1) * sizeof(UnitRun));
    if (runs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < nruns; k++) {
        UnitRun *r = &runs[k];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "iLnn", &r->fd, &r->pos, &r->first, &r->count))
            goto done;
        if (r->first < 0 || r->count < 1 || r->count > m - r->first || r->pos < 0) {
            PyErr_Format(PyExc_ValueError, "write_units: run %zd is outside the %zd units", k, m);
            goto done;
        }
    }
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < nruns && !err; k++) {
        UnitRun *r = &runs[k];
        uint8_t *size_field = (uint8_t *)units.buf + 20 * r->first + 8, first_size[4];
        memcpy(first_size, size_field, 4);
        memset(size_field, 0, 4);
        err = write_all(r->fd, (uint8_t *)units.buf + 20 * r->first, (size_t)r->count * 20, r->pos);
        memcpy(size_field, first_size, 4);
        if (!err) err = write_all(r->fd, first_size, 4, r->pos + 8);
    }
    Py_END_ALLOW_THREADS
    result = none_or_oserror(err);
done:
    PyMem_Free(runs);
    Py_XDECREF(seq);
    PyBuffer_Release(&units);
    return result;
}

static PyObject *set_clmul(PyObject *self, PyObject *arg) {
    /* for tests: run the table path on a CPU that has PCLMULQDQ; returns whether the fast path was on */
    int was = use_clmul, want = PyObject_IsTrue(arg);
    if (want < 0) return NULL;
#ifdef HAVE_CLMUL_CODE
    use_clmul = want && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    return PyBool_FromLong(was);
}

/* ---- a client's MessageBatch body, straight into records (SEND_BATCH_MESSAGE) ------------------------- */

/* plan columns, one int64 row per message */
enum { MB_BODY = 0, MB_BODY_LEN, MB_PROPS, MB_PROPS_LEN, MB_FLAG, MB_EXTRA, MB_TAGS_CODE, MB_SIZE, MB_COLS };
#define MB_CLOSE 1 /* the properties text's last pair lacks its \x02 */
#define MB_UNIQ 2  /* no UNIQ_KEY: one is generated */
static const char UNIQ_HEAD[] = "UNIQ_KEY\x01";
#define UNIQ_HEAD_LEN 9

static inline uint32_t get32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* message_batch_plan(body, topic_len, hosts_len, max_body, plan) -> (n, generated ids), or (-1, message) when a
 * message is not the usual kind (properties not plain ASCII, a transaction half (TRAN_MSG), a body over max_body,
 * properties over 32767 bytes): the caller then takes the general path, which words any error. ValueError when
 * the body does not decode (as message_batch_spans). plan: int64 rows of MB_COLS per message (len(body) // 22 + 1
 * rows). Property rules as PropertiesText: pairs end at \x02, the key at the first \x01, an empty key or value is
 * no pair, a later duplicate wins. hosts_len: born + store address bytes (8, 20 or 32). */
static PyObject *message_batch_plan(PyObject *self, PyObject *args) {
    Py_buffer body, plan;
    Py_ssize_t topic_len, hosts_len, max_body;
    if (!PyArg_ParseTuple(args, "y*nnnw*", &body, &topic_len, &hosts_len, &max_body, &plan)) return NULL;
    const uint8_t *b = (const uint8_t *)body.buf;
    const Py_ssize_t len = body.len, cap = plan.len / (8 * MB_COLS);
    int64_t *row = (int64_t *)plan.buf;
    const int64_t fixed = fixed_record_bytes(hosts_len) + (topic_len > 127 ? 2 : 1) + topic_len;
    Py_ssize_t pos = 0, i = 0, generated = 0, unusual = -1;
    const char *bad = NULL;
    while (pos < len && unusual < 0) {
        if (i >= cap) { bad = "more messages than the plan holds"; break; }
        if (len - pos < 22) { bad = "bytes left, fewer than a message's 22"; break; }
        int64_t total = (int32_t)get32(b + pos), body_len = (int32_t)get32(b + pos + 16);
        if (total < 22 || total > len - pos) { bad = "TOTALSIZE runs past the body"; break; }
        if (body_len < 0 || 22 + body_len > total) { bad = "BODY length runs past its TOTALSIZE"; break; }
        int64_t props_len = (int16_t)(((uint16_t)b[pos + 20 + body_len] << 8) | b[pos + 21 + body_len]);
        if (props_len < 0 || 22 + body_len + props_len > total) { bad = "PROPERTIES length runs past its TOTALSIZE"; break; }
        const uint8_t *p = b + pos + 22 + body_len, *e = p + props_len;
        int64_t *r = row + i * MB_COLS;
        r[MB_BODY] = pos + 20;
        r[MB_BODY_LEN] = body_len;
        r[MB_PROPS] = pos + 22 + body_len;
        r[MB_PROPS_LEN] = props_len;
        r[MB_FLAG] = (int32_t)get32(b + pos + 12);
        const uint8_t *tag = NULL, *tag_end = NULL;
        int has_uniq = 0;
        for (const uint8_t *q = p; q < e && unusual < 0;) {
            const uint8_t *pair_end = q, *sep = NULL;
            while (pair_end < e && *pair_end != 2) {
                if (*pair_end & 0x80) unusual = i;
                if (*pair_end == 1 && sep == NULL) sep = pair_end;
                pair_end++;
            }
            if (sep != NULL && sep > q && pair_end > sep + 1) {
                size_t k = (size_t)(sep - q);
                if (k == 4 && memcmp(q, "TAGS", 4) == 0) { tag = sep + 1; tag_end = pair_end; }
                else if (k == 8 && memcmp(q, "UNIQ_KEY", 8) == 0) has_uniq = 1;
                else if (k == 8 && memcmp(q, "TRAN_MSG", 8) == 0) unusual = i;
            }
            q = pair_end + 1;
        }
        int64_t extra = (props_len > 0 && p[props_len - 1] != 2 ? MB_CLOSE : 0) | (has_uniq ? 0 : MB_UNIQ);
        int64_t stored_props = props_len + (extra & MB_CLOSE ? 1 : 0) + (extra & MB_UNIQ ? UNIQ_HEAD_LEN + ID_LEN + 1 : 0);
        if (body_len > max_body || stored_props > 32767) unusual = i;
        r[MB_EXTRA] = extra;
        generated += has_uniq ? 0 : 1;
        r[MB_TAGS_CODE] = 0;
        if (tag != NULL) java_hash(tag, tag_end, &r[MB_TAGS_CODE]);
        r[MB_SIZE] = fixed + body_len + stored_props;
        pos += total;
        i++;
    }
    PyBuffer_Release(&body);
    PyBuffer_Release(&plan);
    if (bad != NULL) {
        PyErr_Format(PyExc_ValueError, "batch message %zd: %s", i, bad);
        return NULL;
    }
    if (unusual >= 0) return Py_BuildValue("nn", (Py_ssize_t)-1, unusual);
    return Py_BuildValue("nn", i, generated);
}

/* encode_message_batch(out, units, body, plan, n, topic, queue_id, queue_offset, write_pos, sys_flag,
 * born_timestamp, hosts, id_head, id_start): the n planned messages' records back to back into out (exactly their
 * sizes' sum), with consecutive queue offsets from queue_offset and commitlog offsets from write_pos, and their
 * consume-queue units (20 bytes each, big-endian) into units. Each message keeps its FLAG and properties text
 * (closed with \x02 where its last pair lacks one), then a generated UNIQ_KEY where it has none (id_head's 24
 * digits and the low 32 bits of id_start + k, k counting the messages that get one). hosts as Fixed's. */
static PyObject *encode_message_batch(PyObject *self, PyObject *args) {
    Py_buffer out, units, body, plan, topic, hosts, id_head;
    Py_ssize_t n;
    int queue_id, sys_flag;
    long long queue_offset, write_pos, born_ts;
    unsigned long long id_start;
    if (!PyArg_ParseTuple(args, "w*w*y*y*ny*iLLiLy*y*K", &out, &units, &body, &plan, &n, &topic, &queue_id,
                          &queue_offset, &write_pos, &sys_flag, &born_ts, &hosts, &id_head, &id_start))
        return NULL;
    PyObject *result = NULL;
    const int64_t *row = (const int64_t *)plan.buf;
    int64_t total = 0;
    int ok = n >= 0 && plan.len >= n * MB_COLS * 8 && units.len >= n * 20 && id_head.len == ID_HEAD_LEN &&
             hosts.len >= 24;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        const int64_t *r = row + i * MB_COLS;
        total += r[MB_SIZE];
        if (r[MB_BODY] < 0 || r[MB_BODY] + r[MB_BODY_LEN] > body.len || r[MB_PROPS] < 0 ||
            r[MB_PROPS] + r[MB_PROPS_LEN] > body.len)
            ok = 0;
    }
    if (!ok || total != out.len) {
        PyErr_SetString(PyExc_ValueError, "encode_message_batch: the plan does not match its buffers");
        goto done;
    }
    const uint8_t *b = (const uint8_t *)body.buf, *t = (const uint8_t *)topic.buf;
    const Py_ssize_t tl = topic.len;
    uint8_t *o = (uint8_t *)out.buf, *u = (uint8_t *)units.buf;
    uint32_t counter = (uint32_t)id_start;
    int64_t at = write_pos;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *r = row + i * MB_COLS;
        const int64_t size = r[MB_SIZE], body_len = r[MB_BODY_LEN], props_len = r[MB_PROPS_LEN];
        const int64_t extra = r[MB_EXTRA];
        put32(o, (uint32_t)size);
        put32(o + 4, tl > 127 ? MAGIC_V2 : MAGIC_V1);
        put32(o + 12, (uint32_t)queue_id);
        put32(o + 16, (uint32_t)r[MB_FLAG]);
        put64(o + 20, (uint64_t)(queue_offset + i));
        put64(o + 28, (uint64_t)at);
        put32(o + 36, (uint32_t)sys_flag);
        put64(o + 40, (uint64_t)born_ts);
        uint8_t *crc_at = o + 8;
        o += 48;
        memcpy(o, hosts.buf, (size_t)hosts.len);
        o += hosts.len;
        put32(o, 0);       /* RECONSUMETIMES */
        put64(o + 4, 0);   /* PREPAREDTRANSACTIONOFFSET */
        put32(o + 12, (uint32_t)body_len);
        o += 16;
        put32(crc_at, body_crc_copy(o, b + r[MB_BODY], (size_t)body_len));
        o += body_len;
        if (tl > 127) *o++ = (uint8_t)(tl >> 8);
        *o++ = (uint8_t)tl;
        memcpy(o, t, (size_t)tl);
        o += tl;
        int64_t stored = props_len + (extra & MB_CLOSE ? 1 : 0) + (extra & MB_UNIQ ? UNIQ_HEAD_LEN + ID_LEN + 1 : 0);
        *o++ = (uint8_t)(stored >> 8);
        *o++ = (uint8_t)stored;
        memcpy(o, b + r[MB_PROPS], (size_t)props_len);
        o += props_len;
        if (extra & MB_CLOSE) *o++ = 2;
        if (extra & MB_UNIQ) {
            memcpy(o, UNIQ_HEAD, UNIQ_HEAD_LEN);
            memcpy(o + UNIQ_HEAD_LEN, id_head.buf, ID_HEAD_LEN);
            put_hex32(o + UNIQ_HEAD_LEN + ID_HEAD_LEN, counter++);
            o += UNIQ_HEAD_LEN + ID_LEN;
            *o++ = 2;
        }
        put64(u, (uint64_t)at);
        put32(u + 8, (uint32_t)size);
        put64(u + 12, (uint64_t)r[MB_TAGS_CODE]);
        u += 20;
        at += size;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(at);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&units);
    PyBuffer_Release(&body);
    PyBuffer_Release(&plan);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&hosts);
    PyBuffer_Release(&id_head);
    return result;
}

/* ---- one record appended where this writer left the log (MessageStore._append_one_locked) ------------------ */

/* append_at_end(state_fd, state, log_fd, pos, record) -> bool: under the write lock, the record written at pos of
 * its commitlog file when the `lock` file still holds `state` (the committed end this writer published last: no
 * other writer was here since) and nothing lies at pos (no dead writer left bytes there); False, with nothing
 * written, when either differs (the caller then reads the state the long way, _sync_write_state). OSError as
 * pwrite's. */
static PyObject *append_at_end(PyObject *self, PyObject *args) {
    int state_fd, log_fd;
    long long pos;
    Py_buffer state, record;
    if (!PyArg_ParseTuple(args, "iy*iLy*", &state_fd, &state, &log_fd, &pos, &record)) return NULL;
    PyObject *result = NULL;
    uint8_t now[64], head[8];
    int err = 0, same = 0;
    if (state.len > (Py_ssize_t)sizeof now || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "append_at_end: state over 64 bytes or a negative position");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    ssize_t n = pread(state_fd, now, (size_t)state.len, 0);
    if (n < 0) err = errno;
    else if (n == state.len && !memcmp(now, state.buf, (size_t)state.len)) {
        ssize_t h = pread(log_fd, head, sizeof head, (off_t)pos);
        if (h < 0) err = errno;
        else if (h == (ssize_t)sizeof head && !memcmp(head, "\0\0\0\0\0\0\0\0", sizeof head)) {
            err = write_all(log_fd, record.buf, (size_t)record.len, pos);
            same = !err;
        }
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = PyBool_FromLong(same);
done:
    PyBuffer_Release(&state);
    PyBuffer_Release(&record);
    return result;
}

/* ---- one usual single message (put_one.build_plain) ---------------------------------------------------- */

/* The properties text is canonical (properties_to_string of its own parse): every pair `key\x01value\x02` with one
 * \x01, a key and a value, each key once; the last pair's \x02 may be missing (what the Java client's
 * messageProperties2String writes since 4.9): 2 then, and the record closes it as the general put does. Finds TAGS
 * and UNIQ_KEY, and any of the refused keys. */
static int canonical_props(const uint8_t *p, Py_ssize_t n, PyObject *refused, Span2 *tags, Span2 *uniq) {
    enum { MAX_KEYS = 64 };
    Span2 keys[MAX_KEYS];
    int nkeys = 0;
    if (n == 0) return 0;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t k0 = i, sep = -1;
        while (i < n && p[i] != 0x02) {
            if (p[i] == 0x01) {
                if (sep >= 0) return 0;
                sep = i;
            }
            i++;
        }
        if (sep <= k0 || sep + 1 == i || nkeys == MAX_KEYS) return 0; /* no key, no value, or too many */
        Span2 key = {p + k0, sep - k0}, value = {p + sep + 1, i - sep - 1};
        for (int k = 0; k < nkeys; k++)
            if (keys[k].n == key.n && !memcmp(keys[k].p, key.p, key.n)) return 0;
        keys[nkeys++] = key;
        if (key.n == 4 && !memcmp(key.p, "TAGS", 4)) *tags = value;
        else if (key.n == 8 && !memcmp(key.p, "UNIQ_KEY", 8)) *uniq = value;
        for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(refused); r++) {
            Py_ssize_t rl;
            const char *rk = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(refused, r), &rl);
            if (rk == NULL) return -1;
            if (rl == key.n && !memcmp(rk, key.p, rl)) return 0;
        }
        i++;
    }
    return p[n - 1] == 0x02 ? 1 : 2;
}

static int topic_ok(const uint8_t *t, Py_ssize_t n) {
    if (n < 1 || n > 127) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '%' || c == '|' ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* one_record(topic, body, props, flag, sys_flag, born_ts, born_addr, born_port, store_addr, store_port,
 * reconsume_times, max_body, refused) -> (record, tags_code, uniq_key, store_ts_at), or None when it is not the
 * usual message (put_one.build_one's rules: a topic outside [%|a-zA-Z0-9_-]{1,127}, a body over max_body, a
 * properties text that is not canonical (canonical_props) or over 32767 bytes once closed or lacks UNIQ_KEY or holds a refused key, a value out
 * of its field's range): the caller then takes the general put, which words
 * any error. The record as build_one makes it: QUEUEID, QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP zero, set
 * under the write lock (OneRecord.set_place). */
static PyObject *one_record(PyObject *self, PyObject *args) {
    PyObject *topic_obj, *props_obj, *refused;
    Py_buffer body, born, stored;
    long long flag, sys_flag, born_ts, born_port, store_port, reconsume, max_body;
    if (!PyArg_ParseTuple(args, "Uy*ULLLy*Ly*LLLO!", &topic_obj, &body, &props_obj, &flag, &sys_flag, &born_ts, &born,
                          &born_port, &stored, &store_port, &reconsume, &max_body, &PyTuple_Type, &refused))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t topic_len, props_len;
    const uint8_t *topic = (const uint8_t *)PyUnicode_AsUTF8AndSize(topic_obj, &topic_len);
    const uint8_t *props = (const uint8_t *)PyUnicode_AsUTF8AndSize(props_obj, &props_len);
    if (topic == NULL || props == NULL) goto done;
    Span2 tags = {NULL, 0}, uniq = {NULL, 0};
    int canonical = canonical_props(props, props_len, refused, &tags, &uniq);
    if (canonical < 0) goto done;
    Py_ssize_t closing = canonical == 2; /* the missing last \x02, written after the text */
    if (!canonical || uniq.p == NULL || props_len + closing > 32767 || !topic_ok(topic, topic_len) || body.len > max_body ||
        body.len > INT32_MAX || flag < INT32_MIN || flag > INT32_MAX || sys_flag < INT32_MIN || sys_flag > INT32_MAX ||
        reconsume < 0 || reconsume > INT32_MAX || (born.len != 4 && born.len != 16) || (stored.len != 4 && stored.len != 16)) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (born.len == 16) sys_flag |= BORNHOST_V6;
    if (stored.len == 16) sys_flag |= STOREHOST_V6;
    Py_ssize_t size = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born.len + 4 + 8 + stored.len + 4 + 4 + 8 + 4 + body.len + 1 +
                      topic_len + 2 + props_len + closing;
    Py_ssize_t store_ts_at = 48 + born.len + 4;
    PyObject *record = PyByteArray_FromStringAndSize(NULL, size);
    if (record == NULL) goto done;
    uint8_t *o = (uint8_t *)PyByteArray_AS_STRING(record);
    memset(o, 0, size);
    o = put32(o, (uint32_t)size);
    o = put32(o, MAGIC_V1);
    o = put32(o, body_crc((const uint8_t *)body.buf, (size_t)body.len));
    o += 4; /* QUEUEID */
    o = put32(o, (uint32_t)flag);
    o += 16; /* QUEUEOFFSET, PHYSICALOFFSET */
    o = put32(o, (uint32_t)sys_flag);
    o = put64(o, (uint64_t)born_ts);
    o = put_bytes(o, born.buf, born.len);
    o = put32(o, (uint32_t)born_port);
    o += 8; /* STORETIMESTAMP */
    o = put_bytes(o, stored.buf, stored.len);
    o = put32(o, (uint32_t)store_port);
    o = put32(o, (uint32_t)reconsume);
    o += 8; /* PREPAREDTRANSACTIONOFFSET */
    o = put32(o, (uint32_t)body.len);
    o = put_bytes(o, body.buf, body.len);
    *o++ = (uint8_t)topic_len;
    o = put_bytes(o, topic, topic_len);
    *o++ = (uint8_t)((props_len + closing) >> 8);
    *o++ = (uint8_t)(props_len + closing);
    o = put_bytes(o, props, props_len);
    if (closing) *o = 0x02;
    int64_t tags_code = 0;
    if (tags.p != NULL) java_hash(tags.p, tags.p + tags.n, &tags_code);
    result = Py_BuildValue("(NLs#n)", record, (long long)tags_code, (const char *)uniq.p, uniq.n, store_ts_at);
done:
    PyBuffer_Release(&body);
    PyBuffer_Release(&born);
    PyBuffer_Release(&stored);
    return result;
}

static PyMethodDef methods[] = {
    {"message_batch_plan", message_batch_plan, METH_VARARGS, "Plan a client's MessageBatch body's records."},
    {"encode_message_batch", encode_message_batch, METH_VARARGS, "Encode a planned MessageBatch body's records."},
    {"encode_batch", encode_batch, METH_VARARGS, "Encode a batch of CommitLog records into a buffer."},
    {"write_batch", write_batch, METH_VARARGS, "Encode a batch of CommitLog records and write them to files."},
    {"record_sizes", record_sizes, METH_VARARGS, "Sizes of the records of a batch."},
    {"java_hash_codes", java_hash_codes, METH_VARARGS, "Java String.hashCode() of many UTF-8 texts."},
    {"hex_ids", hex_ids, METH_VARARGS, "Rows of a fixed head and a hex counter."},
    {"first_separator", first_separator, METH_VARARGS, "First row of a text column holding \\x01 or \\x02."},
    {"assign_offsets", assign_offsets, METH_VARARGS, "Commitlog and queue offsets and consume-queue units of a batch."},
    {"write_units", write_units, METH_VARARGS, "Write runs of consume-queue units, each run's first size last."},
    {"body_crcs", body_crcs, METH_VARARGS, "BODYCRC of each element of an int32-offsets binary column."},
    {"one_record", one_record, METH_VARARGS, "One usual single message's record, or None."},
    {"append_at_end", append_at_end, METH_VARARGS, "One record written where this writer left the log, or False."},
    {"set_clmul", set_clmul, METH_O, "Use (or not) the PCLMULQDQ CRC path; returns the previous setting."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_encode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__encode(void) {
    crc32_init();
    init_hex_pairs();
    return PyModule_Create(&module);
}
