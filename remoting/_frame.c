/* The hottest requests' frames read, and SEND_OK written, in compiled code (remoting/request_frame.py wraps it).
 *
 * read_request(payload): a SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) or SEND_BATCH_MESSAGE (320) request, JSON or
 * ROCKETMQ header, read straight into SendMessageRequestHeader's fields, a PULL_MESSAGE (11) into PullMessageRequestHeader's; None for
 * anything else and for anything unusual (a field that is not
 * a plain number or boolean, an unknown header field but IGNORED's, a nested JSON value, bad UTF-8), which RemotingCommand.decode
 * then reads and words the errors of, as for any frame. Conservative on purpose: None only costs the general path.
 *
 * send_ok(...): SEND_OK's whole frame, the same bytes RemotingCommand.encode writes for that answer.
 * encode_head(...): any command's frame up to its body, the same bytes RemotingCommand.encode_head writes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SEND_MESSAGE 10
#define SEND_MESSAGE_V2 310
#define PULL_MESSAGE 11
#define SEND_BATCH_MESSAGE 320
#define MAX_PAIRS 32

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Span;

typedef struct {
    Span key, value;
} Pair;

typedef struct {
    int64_t code, opaque, flag, version;
    int has_code;
    PyObject *language; /* new reference or NULL */
    Pair pairs[MAX_PAIRS];
    int npairs;
} Head;

/* ---- JSON -------------------------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
    uint8_t *out; /* unescaped strings go here, back to back */
} Json;

static void ws(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hex4(const uint8_t *p, uint32_t *v) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= c - '0';
        else if (c >= 'a' && c <= 'f') x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x |= c - 'A' + 10;
        else return 0;
    }
    *v = x;
    return 1;
}

static uint8_t *utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) *o++ = (uint8_t)cp;
    else if (cp < 0x800) { *o++ = 0xC0 | (cp >> 6); *o++ = 0x80 | (cp & 0x3F); }
    else if (cp < 0x10000) { *o++ = 0xE0 | (cp >> 12); *o++ = 0x80 | ((cp >> 6) & 0x3F); *o++ = 0x80 | (cp & 0x3F); }
    else {
        *o++ = 0xF0 | (cp >> 18); *o++ = 0x80 | ((cp >> 12) & 0x3F);
        *o++ = 0x80 | ((cp >> 6) & 0x3F); *o++ = 0x80 | (cp & 0x3F);
    }
    return o;
}

/* A string at j->p (the opening quote); its unescaped bytes into j->out. 0 on anything JSON refuses or a lone
 * surrogate (left to the general path). */
static int jstring(Json *j, Span *s) {
    if (j->p >= j->end || *j->p != '"') return 0;
    j->p++;
    uint8_t *start = j->out, *o = j->out;
    while (j->p < j->end) {
        uint8_t c = *j->p++;
        if (c == '"') {
            s->p = start;
            s->n = o - start;
            j->out = o;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c != '\\') { *o++ = c; continue; }
        if (j->p >= j->end) return 0;
        c = *j->p++;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (j->end - j->p < 4 || !hex4(j->p, &cp)) return 0;
            j->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) ||
                    lo < 0xDC00 || lo >= 0xE000)
                    return 0;
                j->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return 0;
            }
            o = utf8(o, cp);
            break;
        }
        default: return 0;
        }
    }
    return 0;
}

/* An integer (no fraction or exponent, no leading zero: JSON's) of at most 18 digits. */
static int jint(Json *j, int64_t *v) {
    int neg = 0, digits = 0;
    int64_t x = 0;
    if (j->p < j->end && *j->p == '-') { neg = 1; j->p++; }
    if (j->end - j->p >= 2 && j->p[0] == '0' && j->p[1] >= '0' && j->p[1] <= '9') return 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (++digits > 18) return 0;
        x = x * 10 + (*j->p++ - '0');
    }
    if (!digits) return 0;
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) return 0;
    *v = neg ? -x : x;
    return 1;
}

static int jword(Json *j, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n)) return 0;
    j->p += n;
    return 1;
}

/* A scalar value skipped (a top-level field this reader does not need); 0 for an object or array. */
static int jskip(Json *j) {
    Span s;
    int64_t v;
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '"': return jstring(j, &s);
    case 't': return jword(j, "true");
    case 'f': return jword(j, "false");
    case 'n': return jword(j, "null");
    default: return jint(j, &v);
    }
}

static int key_is(Span k, const char *name) {
    size_t n = strlen(name);
    return (size_t)k.n == n && !memcmp(k.p, name, n);
}

static int json_ext(Json *j, Head *h) {
    ws(j);
    if (jword(j, "null")) return 1;
    if (j->p >= j->end || *j->p != '{') return 0;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return 1; }
    for (;;) {
        if (h->npairs == MAX_PAIRS) return 0;
        Pair *pair = &h->pairs[h->npairs++];
        ws(j);
        if (!jstring(j, &pair->key)) return 0;
        ws(j);
        if (j->p >= j->end || *j->p++ != ':') return 0;
        ws(j);
        if (!jstring(j, &pair->value)) return 0; /* a value that is not text: the general path */
        ws(j);
        if (j->p >= j->end) return 0;
        if (*j->p == ',') { j->p++; continue; }
        if (*j->p == '}') { j->p++; return 1; }
        return 0;
    }
}

/* Well-formed UTF-8 (no overlong form, no surrogate, nothing past U+10FFFF), as the JSON decoders demand of a
 * whole header. */
static int utf8_valid(const uint8_t *p, const uint8_t *e) {
    while (p < e) {
        uint8_t c = *p;
        if (c < 0x80) { p++; continue; }
        Py_ssize_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (n == 0 || c > 0xF4 || e - p < n) return 0;
        for (Py_ssize_t k = 1; k < n; k++)
            if ((p[k] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
            (c == 0xF4 && p[1] >= 0x90))
            return 0;
        p += n;
    }
    return 1;
}

static int json_head(const uint8_t *p, Py_ssize_t n, uint8_t *scratch, Head *h) {
    if (!utf8_valid(p, p + n)) return 0;
    Json j = {p, p + n, scratch};
    ws(&j);
    if (j.p >= j.end || *j.p++ != '{') return 0;
    ws(&j);
    if (j.p < j.end && *j.p == '}') return 0;
    for (;;) {
        Span key;
        ws(&j);
        if (!jstring(&j, &key)) return 0;
        ws(&j);
        if (j.p >= j.end || *j.p++ != ':') return 0;
        ws(&j);
        int64_t *num = key_is(key, "code") ? &h->code : key_is(key, "opaque") ? &h->opaque :
                       key_is(key, "flag") ? &h->flag : key_is(key, "version") ? &h->version : NULL;
        if (num != NULL) {
            if (!jint(&j, num)) return 0;
            if (num == &h->code) h->has_code = 1;
        } else if (key_is(key, "extFields")) {
            h->npairs = 0; /* a repeated key: the last one counts, as in the JSON decoders */
            if (!json_ext(&j, h)) return 0;
        } else if (key_is(key, "language")) {
            Span s;
            int64_t v;
            PyObject *lang;
            if (j.p < j.end && *j.p == '"') {
                if (!jstring(&j, &s)) return 0;
                lang = PyUnicode_DecodeUTF8((const char *)s.p, s.n, NULL);
            } else {
                if (!jint(&j, &v)) return 0;
                lang = PyLong_FromLongLong(v);
            }
            if (lang == NULL) { PyErr_Clear(); return 0; }
            Py_XSETREF(h->language, lang);
        } else if (!jskip(&j)) {
            return 0;
        }
        ws(&j);
        if (j.p >= j.end) return 0;
        if (*j.p == ',') { j.p++; continue; }
        if (*j.p != '}') return 0;
        j.p++;
        ws(&j);
        return j.p == j.end;
    }
}

/* ---- ROCKETMQ ---------------------------------------------------------------------------------------------- */

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int binary_head(const uint8_t *p, Py_ssize_t n, Head *h) {
    if (n < 13 + 4) return 0;
    h->code = (int16_t)((p[0] << 8) | p[1]);
    h->has_code = 1;
    h->language = PyLong_FromLong((int8_t)p[2]);
    if (h->language == NULL) { PyErr_Clear(); return 0; }
    h->version = (int16_t)((p[3] << 8) | p[4]);
    h->opaque = (int32_t)be32(p + 5);
    h->flag = (int32_t)be32(p + 9);
    Py_ssize_t pos = 13;
    int32_t remark = (int32_t)be32(p + pos);
    pos += 4;
    if (remark < 0 || remark > n - pos || !utf8_valid(p + pos, p + pos + remark)) return 0;
    pos += remark;
    if (n - pos < 4) return 0;
    int32_t ext = (int32_t)be32(p + pos);
    pos += 4;
    if (ext < 0 || ext != n - pos) return 0;
    while (pos < n) {
        if (h->npairs == MAX_PAIRS || n - pos < 2) return 0;
        Pair *pair = &h->pairs[h->npairs++];
        int16_t kl = (int16_t)((p[pos] << 8) | p[pos + 1]);
        pos += 2;
        if (kl < 0 || kl > n - pos) return 0;
        pair->key.p = p + pos;
        pair->key.n = kl;
        pos += kl;
        if (n - pos < 4) return 0;
        int32_t vl = (int32_t)be32(p + pos);
        pos += 4;
        if (vl < 0 || vl > n - pos) return 0;
        pair->value.p = p + pos;
        pair->value.n = vl;
        pos += vl;
    }
    return 1;
}

/* ---- fields ------------------------------------------------------------------------------------------------ */

/* A typed header's fields as the general reader reads them (remoting/command_header.py): kinds 's' text, 'i'
 * 32-bit, 'l' 64-bit, 'b' boolean; required ones must be there. */
typedef struct {
    int codes[3];
    int nfields;
    const char *kinds;
    const char **names;
    const int *short_field; /* V2's short names a.. -> field, or NULL */
    unsigned required;      /* bit i: field i must be there */
} Spec;

#define NSEND 13
/* SendMessageRequestHeader */
static const char *SEND_NAMES[NSEND] = {
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
    "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes"};
/* SendMessageRequestHeaderV2's short names a..m -> the field above (l is maxReconsumeTimes, m is batch) */
static const int SEND_SHORT[NSEND] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 11};
static const Spec SEND = {{SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE}, NSEND, "sssiiilisibbi", SEND_NAMES, SEND_SHORT, 1u << 1};

#define NPULL 12
/* PullMessageRequestHeader */
static const char *PULL_NAMES[NPULL] = {
    "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
    "suspendTimeoutMillis", "subVersion", "subscription", "expressionType", "maxMsgBytes"};
static const Spec PULL = {{PULL_MESSAGE, PULL_MESSAGE, PULL_MESSAGE}, NPULL, "ssiliilllssi", PULL_NAMES, NULL, 0x1FF};
static const Spec *SPECS[] = {&SEND, &PULL};

/* A field's text as its kind: an int in range, "true"/"false", or UTF-8 text; NULL (no error set) for anything
 * the general reader should word. */
static PyObject *field_value(char kind, Span v) {
    if (kind == 's') {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)v.p, v.n, NULL);
        if (s == NULL) PyErr_Clear();
        return s;
    }
    if (kind == 'b') {
        if (v.n == 4 && !memcmp(v.p, "true", 4)) Py_RETURN_TRUE;
        if (v.n == 5 && !memcmp(v.p, "false", 5)) Py_RETURN_FALSE;
        return NULL;
    }
    Py_ssize_t i = 0;
    int neg = 0;
    if (v.n && v.p[0] == '-') { neg = 1; i = 1; }
    if (v.n - i < 1 || v.n - i > 18) return NULL;
    int64_t x = 0;
    for (; i < v.n; i++) {
        if (v.p[i] < '0' || v.p[i] > '9') return NULL;
        x = x * 10 + (v.p[i] - '0');
    }
    if (neg) x = -x;
    if (kind == 'i' && (x < INT32_MIN || x > INT32_MAX)) return NULL;
    return PyLong_FromLongLong(x);
}

/* Header fields RocketMQ's Java clients send that the broker does not read, nor does the general reader: the send
 * V2's `n` and RpcRequestHeader's (`bname` on every send and pull of 4.9.7, the others 5.x's), the broker's name and
 * routing hints for a proxy. */
static const char *IGNORED[] = {"n", "bname", "ns", "nsd", "oway", "lo"};
#define IGNORED_FIELD (-2)

static int field_index(const Spec *spec, Span k, int short_names) {
    if (short_names) {
        if (k.n == 1 && k.p[0] >= 'a' && k.p[0] < 'a' + spec->nfields) return spec->short_field[k.p[0] - 'a'];
    } else {
        for (int i = 0; i < spec->nfields; i++)
            if (key_is(k, spec->names[i])) return i;
    }
    for (size_t i = 0; i < sizeof IGNORED / sizeof IGNORED[0]; i++)
        if (key_is(k, IGNORED[i])) return IGNORED_FIELD;
    return -1;
}

/* (code, opaque, serialize type, language, version, fields, body start) of a request one of the specs reads (the
 * one for its code), or None. */
static PyObject *read_request(PyObject *self, PyObject *arg) {
    const Spec *spec = NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *p = b.buf;
    Py_ssize_t n = b.len;
    PyObject *result = NULL, *fields[16] = {NULL};
    Head h;
    memset(&h, 0, sizeof h);
    uint8_t stack[2048], *scratch = stack;
    if (n < 4) goto not_mine;
    uint32_t mark = be32(p);
    Py_ssize_t hlen = mark & 0xFFFFFF;
    int kind = mark >> 24;
    if (hlen > n - 4) goto not_mine;
    if (kind == 0) {
        if (hlen > (Py_ssize_t)sizeof stack) {
            scratch = PyMem_Malloc(hlen);
            if (scratch == NULL) { PyBuffer_Release(&b); return PyErr_NoMemory(); }
        }
        if (!json_head(p + 4, hlen, scratch, &h)) goto not_mine;
    } else if (kind == 1) {
        if (!binary_head(p + 4, hlen, &h)) goto not_mine;
    } else {
        goto not_mine;
    }
    if (!h.has_code || h.flag != 0 || h.opaque < INT32_MIN || h.opaque > INT32_MAX || h.version < INT32_MIN ||
        h.version > INT32_MAX)
        goto not_mine;
    for (size_t i = 0; i < sizeof SPECS / sizeof SPECS[0]; i++)
        for (int c = 0; c < 3; c++)
            if (h.code == SPECS[i]->codes[c]) spec = SPECS[i];
    if (spec == NULL) goto not_mine;
    /* RocketMQ's V2 send header when its short topic is there (read_send_header's rule) */
    int short_names = 0;
    if (spec->short_field != NULL && (h.code == SEND_MESSAGE_V2 || h.code == SEND_BATCH_MESSAGE))
        for (int i = 0; i < h.npairs; i++)
            if (h.pairs[i].key.n == 1 && h.pairs[i].key.p[0] == 'b') short_names = 1;
    for (int i = 0; i < h.npairs; i++) {
        int f = field_index(spec, h.pairs[i].key, short_names);
        if (f == IGNORED_FIELD) { /* not read, but text the general decoder must decode */
            PyObject *v = field_value('s', h.pairs[i].value);
            if (v == NULL) goto not_mine;
            Py_DECREF(v);
            continue;
        }
        if (f < 0) goto not_mine; /* a field of something else (the ACL's signature, say) */
        PyObject *v = field_value(spec->kinds[f], h.pairs[i].value);
        if (v == NULL) goto not_mine;
        Py_XSETREF(fields[f], v);
    }
    for (int i = 0; i < spec->nfields; i++)
        if ((spec->required >> i & 1) && fields[i] == NULL) goto not_mine;
    if (spec == &SEND && (fields[1] == NULL || PyUnicode_GET_LENGTH(fields[1]) == 0)) goto not_mine; /* no topic */
    PyObject *header = PyTuple_New(spec->nfields);
    if (header == NULL) goto done;
    for (int i = 0; i < spec->nfields; i++) {
        PyObject *v = fields[i] != NULL ? fields[i] : Py_None;
        Py_INCREF(v);
        PyTuple_SET_ITEM(header, i, v);
    }
    PyObject *language = h.language != NULL ? h.language : Py_None;
    result = Py_BuildValue("(LLiOLNn)", (long long)h.code, (long long)h.opaque, kind, language,
                           (long long)h.version, header, 4 + hlen);
    goto done;
not_mine:
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < 16; i++) Py_XDECREF(fields[i]);
    Py_XDECREF(h.language);
    if (scratch != stack) PyMem_Free(scratch);
    PyBuffer_Release(&b);
    return result;
}


/* ---- SEND_OK ----------------------------------------------------------------------------------------------- */

static uint8_t *put_be32(uint8_t *o, uint32_t v) {
    o[0] = v >> 24; o[1] = v >> 16; o[2] = v >> 8; o[3] = v;
    return o + 4;
}

static uint8_t *put_text(uint8_t *o, const char *s, size_t n) {
    memcpy(o, s, n);
    return o + n;
}

#define TEXT(o, lit) put_text(o, lit, sizeof(lit) - 1)

/* send_ok(serialize_type, opaque, msg_id, queue_id, queue_offset, language_name, language_code, version):
 * RemotingCommand(code=SUCCESS, flag=RESPONSE, ext_fields={msgId, queueId, queueOffset, MSG_REGION, TRACE_ON})
 * encoded. None when a text needs JSON escaping (the general encoder then writes it). */
static PyObject *send_ok(PyObject *self, PyObject *args) {
    int st, language_code, version;
    long long opaque, queue_id, queue_offset;
    const char *msg_id, *language;
    Py_ssize_t id_len, lang_len;
    if (!PyArg_ParseTuple(args, "iLs#LLs#ii", &st, &opaque, &msg_id, &id_len, &queue_id, &queue_offset, &language,
                          &lang_len, &language_code, &version)) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (id_len > 4096 || lang_len > 64) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < id_len; i++)
        if (msg_id[i] < 0x20 || msg_id[i] == '"' || msg_id[i] == '\\' || (unsigned char)msg_id[i] >= 0x7F)
            Py_RETURN_NONE;
    char qid[24], qoff[24];
    int qid_len = snprintf(qid, sizeof qid, "%lld", queue_id);
    int qoff_len = snprintf(qoff, sizeof qoff, "%lld", queue_offset);
    uint8_t buf[4096 + 512], *o = buf + 8, *head = buf + 8;
    if (st == 0) {
        char num[64];
        o = TEXT(o, "{\"code\":0,\"language\":\"");
        o = put_text(o, language, lang_len);
        o = put_text(o, num, snprintf(num, sizeof num, "\",\"version\":%d,\"opaque\":%lld,", version, opaque));
        o = TEXT(o, "\"flag\":1,\"serializeTypeCurrentRPC\":\"JSON\",\"extFields\":{\"msgId\":\"");
        o = put_text(o, msg_id, id_len);
        o = TEXT(o, "\",\"queueId\":\"");
        o = put_text(o, qid, qid_len);
        o = TEXT(o, "\",\"queueOffset\":\"");
        o = put_text(o, qoff, qoff_len);
        o = TEXT(o, "\",\"MSG_REGION\":\"DefaultRegion\",\"TRACE_ON\":\"false\"}}");
    } else if (st == 1) {
        *o++ = 0; *o++ = 0; /* code SUCCESS */
        *o++ = (uint8_t)language_code;
        *o++ = (uint8_t)(version >> 8); *o++ = (uint8_t)version;
        o = put_be32(o, (uint32_t)opaque);
        o = put_be32(o, 1); /* flag: a response */
        o = put_be32(o, 0); /* no remark */
        uint8_t *ext_len = o;
        o += 4;
        const char *keys[5] = {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"};
        const char *values[5] = {msg_id, qid, qoff, "DefaultRegion", "false"};
        size_t lens[5] = {(size_t)id_len, (size_t)qid_len, (size_t)qoff_len, 13, 5};
        for (int i = 0; i < 5; i++) {
            size_t kl = strlen(keys[i]);
            *o++ = 0; *o++ = (uint8_t)kl;
            o = put_text(o, keys[i], kl);
            o = put_be32(o, (uint32_t)lens[i]);
            o = put_text(o, values[i], lens[i]);
        }
        put_be32(ext_len, (uint32_t)(o - ext_len - 4));
    } else {
        Py_RETURN_NONE;
    }
    uint32_t hlen = (uint32_t)(o - head);
    put_be32(buf, 4 + hlen);
    put_be32(buf + 4, ((uint32_t)st << 24) | hlen);
    return PyBytes_FromStringAndSize((const char *)buf, o - buf);
}

/* ---- any command's head ------------------------------------------------------------------------------------ */

/* JSON text as orjson and json (ensure_ascii=False) write it: ", \ and the control characters escaped (\b \t \n
 * \f \r short, the rest \u00xx), everything else as its UTF-8. */
static uint8_t *json_text(uint8_t *o, const uint8_t *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') { *o++ = c; continue; }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default: *o++ = 'u'; *o++ = '0'; *o++ = '0'; *o++ = hex[c >> 4]; *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    return o;
}

static uint8_t *put_be16(uint8_t *o, uint16_t v) {
    o[0] = v >> 8; o[1] = (uint8_t)v;
    return o + 2;
}

/* encode_head(serialize_type, code, language, language_name, version, opaque, flag, remark, ext_fields, body_len):
 * RemotingCommand.encode_head's bytes (the length prefix, the header's length and type, the header), or None for
 * anything its general encoder words or writes otherwise (a value out of its field's range, a text that is not
 * UTF-8 as it stands, a value that is not text, a header past 16 MiB). */
static PyObject *encode_head(PyObject *self, PyObject *args) {
    int st;
    long long code, language, version, opaque, flag, body_len;
    const char *lang_name;
    Py_ssize_t lang_len;
    PyObject *remark, *ext;
    if (!PyArg_ParseTuple(args, "iLLs#LLLOO!L", &st, &code, &language, &lang_name, &lang_len, &version, &opaque,
                          &flag, &remark, &PyDict_Type, &ext, &body_len)) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
        goto general; /* a number past 64 bits, a field that is not a number: the general encoder's */
    }
    const char *rem = NULL;
    Py_ssize_t rem_len = 0, need = 128 + lang_len;
    if (remark != Py_None) {
        if (!PyUnicode_Check(remark) || (rem = PyUnicode_AsUTF8AndSize(remark, &rem_len)) == NULL) goto general;
        need += 16 + 6 * rem_len;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(ext, &pos, &k, &v)) {
        Py_ssize_t kl, vl;
        if (!PyUnicode_Check(k) || !PyUnicode_Check(v) || PyUnicode_AsUTF8AndSize(k, &kl) == NULL ||
            PyUnicode_AsUTF8AndSize(v, &vl) == NULL)
            goto general;
        need += 16 + 6 * (kl + vl);
    }
    if (st == 1 && (code < INT16_MIN || code > INT16_MAX || language < -128 || language > 127 ||
                    version < INT16_MIN || version > INT16_MAX || opaque < INT32_MIN || opaque > INT32_MAX ||
                    flag < INT32_MIN || flag > INT32_MAX))
        goto general;
    if (st != 0 && st != 1) goto general;
    PyObject *out = PyBytes_FromStringAndSize(NULL, need);
    if (out == NULL) return NULL;
    uint8_t *base = (uint8_t *)PyBytes_AS_STRING(out), *head = base + 8, *o = head;
    if (st == 0) {
        char num[160];
        o = TEXT(o, "{\"code\":");
        o = put_text(o, num, snprintf(num, sizeof num, "%lld", code));
        o = TEXT(o, ",\"language\":\"");
        o = put_text(o, lang_name, lang_len);
        o = put_text(o, num, snprintf(num, sizeof num, "\",\"version\":%lld,\"opaque\":%lld,\"flag\":%lld,", version,
                                      opaque, flag));
        o = TEXT(o, "\"serializeTypeCurrentRPC\":\"JSON\"");
        if (rem != NULL) {
            o = TEXT(o, ",\"remark\":");
            o = json_text(o, (const uint8_t *)rem, rem_len);
        }
        if (PyDict_GET_SIZE(ext)) {
            o = TEXT(o, ",\"extFields\":{");
            pos = 0;
            int first = 1;
            while (PyDict_Next(ext, &pos, &k, &v)) {
                Py_ssize_t kl, vl;
                const char *ks = PyUnicode_AsUTF8AndSize(k, &kl), *vs = PyUnicode_AsUTF8AndSize(v, &vl);
                if (!first) *o++ = ',';
                first = 0;
                o = json_text(o, (const uint8_t *)ks, kl);
                *o++ = ':';
                o = json_text(o, (const uint8_t *)vs, vl);
            }
            *o++ = '}';
        }
        *o++ = '}';
    } else {
        o = put_be16(o, (uint16_t)code);
        *o++ = (uint8_t)language;
        o = put_be16(o, (uint16_t)version);
        o = put_be32(o, (uint32_t)opaque);
        o = put_be32(o, (uint32_t)flag);
        o = put_be32(o, (uint32_t)rem_len);
        o = put_text(o, rem != NULL ? rem : "", rem_len);
        uint8_t *ext_len = o;
        o += 4;
        pos = 0;
        while (PyDict_Next(ext, &pos, &k, &v)) {
            Py_ssize_t kl, vl;
            const char *ks = PyUnicode_AsUTF8AndSize(k, &kl), *vs = PyUnicode_AsUTF8AndSize(v, &vl);
            if (kl > INT16_MAX) { Py_DECREF(out); goto general; }
            o = put_be16(o, (uint16_t)kl);
            o = put_text(o, ks, kl);
            o = put_be32(o, (uint32_t)vl);
            o = put_text(o, vs, vl);
        }
        put_be32(ext_len, (uint32_t)(o - ext_len - 4));
    }
    Py_ssize_t hlen = o - head;
    if (hlen >= (1 << 24) || 4 + hlen + body_len > INT32_MAX) { Py_DECREF(out); goto general; }
    put_be32(base, (uint32_t)(4 + hlen + body_len));
    put_be32(base + 4, ((uint32_t)st << 24) | (uint32_t)hlen);
    if (_PyBytes_Resize(&out, o - base) < 0) return NULL;
    return out;
general:
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_request", read_request, METH_O, "A single send's or a pull's frame read into its header's fields, or None."},
    {"send_ok", send_ok, METH_VARARGS, "SEND_OK's frame for a stored single send."},
    {"encode_head", encode_head, METH_VARARGS, "A command's frame up to its body, as RemotingCommand.encode_head."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frame", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frame(void) { return PyModule_Create(&module); }
