/* CRC32 (zlib's polynomial), shared by store/_encode.c and store/_native.c (static functions: each extension
 * gets its own copy and calls crc32_init() once when loaded).
 *
 * Carry-less multiplication folding (PCLMULQDQ, as in Intel's white paper "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" and zlib-ng/Chromium) for spans of 32 bytes and more when the CPU has it, about
 * 4x faster than table lookups on 100-byte bodies; a 4-table loop for the rest (and for every span on other
 * CPUs). Spans under 128 bytes (a message body's usual size) fold every 16-byte block straight to the end in
 * parallel rather than one after another, so a record's CRC waits on one multiplication, not seven. */
#ifndef STORE_CRC32_H
#define STORE_CRC32_H

#include <stddef.h>
#include <stdint.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CLMUL_CODE 1
#include <immintrin.h>
#endif

static uint32_t crc_table[4][256];
static int use_clmul;

static void make_crc_table(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t r = b;
        for (int bit = 0; bit < 8; bit++) r = (r >> 1) ^ (0xEDB88320u & (0u - (r & 1u)));
        crc_table[0][b] = r;
    }
    for (int t = 1; t < 4; t++)
        for (uint32_t b = 0; b < 256; b++)
            crc_table[t][b] = (crc_table[t - 1][b] >> 8) ^ crc_table[0][crc_table[t - 1][b] & 0xFF];
}

/* state: the running (inverted) register; bytes are taken one 32-bit little-endian word at a time. */
static inline uint32_t crc_tables(uint32_t state, const uint8_t *p, size_t len) {
    for (; len >= 4; p += 4, len -= 4) {
        uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        w ^= state;
        state = crc_table[3][w & 0xFF] ^ crc_table[2][(w >> 8) & 0xFF] ^ crc_table[1][(w >> 16) & 0xFF] ^
                crc_table[0][w >> 24];
    }
    for (; len; p++, len--) state = crc_table[0][(state ^ *p) & 0xFF] ^ (state >> 8);
    return state;
}

#ifdef HAVE_CLMUL_CODE
#define CRC_CLMUL_MIN 32    /* shorter spans: tables */
#define CRC_SHORT_BLOCKS 8  /* spans of fewer 16-byte blocks fold each block to the end at once */

/* crc_fold_k[d]: folds a 128-bit block forward by d blocks: (x^(128d+32) mod P, x^(128d-32) mod P), each
 * bit-reflected and shifted left by one (the white paper's k constants; d = 1 and 4 are its k3/k4 and k1/k2,
 * which the 4-lane loop uses). */
static __m128i crc_fold_k[CRC_SHORT_BLOCKS];

static uint64_t crc_fold_constant(unsigned bits) {
    uint64_t r = 1; /* x^bits mod P(x), P = 0x104C11DB7 */
    for (unsigned i = 0; i < bits; i++) {
        r <<= 1;
        if (r & 0x100000000ull) r ^= 0x104C11DB7ull;
    }
    uint32_t v = (uint32_t)r, reflected = 0;
    for (int i = 0; i < 32; i++) reflected |= ((v >> i) & 1u) << (31 - i);
    return (uint64_t)reflected << 1;
}

__attribute__((target("sse4.1,pclmul"))) static void make_crc_fold_k(void) {
    for (unsigned d = 1; d < CRC_SHORT_BLOCKS; d++)
        crc_fold_k[d] = _mm_set_epi64x((long long)crc_fold_constant(128 * d - 32),
                                       (long long)crc_fold_constant(128 * d + 32));
}

#define CLMUL_FOLD(acc, k, next) \
    _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x11), _mm_clmulepi64_si128(acc, k, 0x00)), next)

/* 16 bytes from p, and to dst as well unless dst is NULL. */
static inline __m128i crc_load(const uint8_t *p, uint8_t *dst) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    if (dst) _mm_storeu_si128((__m128i *)dst, v);
    return v;
}

/* len >= CRC_CLMUL_MIN and a multiple of 16; state as in crc_tables. Under CRC_SHORT_BLOCKS blocks: each block
 * folded straight to the last one (independent multiplications). Longer: folds four 128-bit lanes 64 bytes at a
 * time, then one lane 16 bytes at a time. Then reduces 128 -> 64 -> 32 bits (Barrett). dst: NULL, or where the
 * bytes are copied as they are read (a record's body and its BODYCRC in one pass). */
__attribute__((target("sse4.1,pclmul"), always_inline)) static inline uint32_t
crc_clmul_to(uint32_t state, const uint8_t *p, uint8_t *dst, size_t len) {
    const __m128i k1k2 = crc_fold_k[4], k3k4 = crc_fold_k[1]; /* 0x1c6e41596/0x154442bd4, 0xccaa009e/0x1751997d0 */
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    size_t at = 0; /* bytes read */
#define CRC_NEXT(i) crc_load(p + at + (i), dst ? dst + at + (i) : NULL)
    __m128i a;
    if (len < 16 * CRC_SHORT_BLOCKS) {
        size_t blocks = len / 16;
        a = CRC_NEXT(len - 16);
        for (size_t b = 0; b + 1 < blocks; b++) {
            __m128i x = CRC_NEXT(16 * b), k = crc_fold_k[blocks - 1 - b];
            if (b == 0) x = _mm_xor_si128(x, _mm_cvtsi32_si128((int)state));
            a = _mm_xor_si128(a, _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x11), _mm_clmulepi64_si128(x, k, 0x00)));
        }
        goto reduce;
    }
    a = _mm_xor_si128(CRC_NEXT(0), _mm_cvtsi32_si128((int)state));
    __m128i b = CRC_NEXT(16), c = CRC_NEXT(32), d = CRC_NEXT(48);
    for (at = 64; len - at >= 64; at += 64) {
        a = CLMUL_FOLD(a, k1k2, CRC_NEXT(0));
        b = CLMUL_FOLD(b, k1k2, CRC_NEXT(16));
        c = CLMUL_FOLD(c, k1k2, CRC_NEXT(32));
        d = CLMUL_FOLD(d, k1k2, CRC_NEXT(48));
    }
    a = CLMUL_FOLD(a, k3k4, b);
    a = CLMUL_FOLD(a, k3k4, c);
    a = CLMUL_FOLD(a, k3k4, d);
    for (; len - at >= 16; at += 16) a = CLMUL_FOLD(a, k3k4, CRC_NEXT(0));
#undef CRC_NEXT
reduce:
    a = _mm_xor_si128(_mm_srli_si128(a, 8), _mm_clmulepi64_si128(a, k3k4, 0x10));
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k5, 0x00), _mm_srli_si128(a, 4));
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(a, t), 1);
}

__attribute__((target("sse4.1,pclmul"))) static uint32_t crc_clmul(uint32_t state, const uint8_t *p, size_t len) {
    return crc_clmul_to(state, p, NULL, len);
}

/* crc_clmul that also copies the bytes to dst. */
__attribute__((target("sse4.1,pclmul"))) static inline uint32_t crc_clmul_copy(uint32_t state, const uint8_t *p,
                                                                               uint8_t *dst, size_t len) {
    return crc_clmul_to(state, p, dst, len);
}
#endif

/* zlib.crc32(p[0:len]). */
static uint32_t crc32_of(const uint8_t *p, size_t len) {
    uint32_t state = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_CODE
    if (use_clmul && len >= CRC_CLMUL_MIN) {
        size_t bulk = len & ~(size_t)15;
        state = crc_clmul(state, p, bulk);
        p += bulk;
        len -= bulk;
    }
#endif
    return crc_tables(state, p, len) ^ 0xFFFFFFFFu;
}

/* RocketMQ's BODYCRC: the CRC32 & 0x7FFFFFFF. */
static uint32_t body_crc(const uint8_t *p, size_t len) { return crc32_of(p, len) & 0x7FFFFFFFu; }

/* Tables, and the PCLMULQDQ path when the CPU has it. */
static void crc32_init(void) {
    make_crc_table();
#ifdef HAVE_CLMUL_CODE
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (use_clmul) make_crc_fold_k(); /* set_clmul turns the path on only where the CPU has it, i.e. here */
#endif
}

#endif
