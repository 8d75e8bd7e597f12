#include "hoist_checksum.h"
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];
static int ready = 0;
static int hardware = 0;

static uint32_t software(uint32_t crc, const unsigned char *p, size_t len) {
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^ table[5][(word >> 16) & 0xff] ^
              table[4][(word >> 24) & 0xff] ^ table[3][(word >> 32) & 0xff] ^ table[2][(word >> 40) & 0xff] ^
              table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

// GF(2) matrix times vector, and a matrix squared: the operators that move a CRC past zero bytes.
static uint32_t gf2_times(const uint32_t *matrix, uint32_t vector) {
    uint32_t sum = 0;
    for (; vector; vector >>= 1, matrix++) if (vector & 1) sum ^= *matrix;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++) square[n] = gf2_times(matrix, matrix[n]);
}

#if defined(__x86_64__)
// The crc32 instruction takes three cycles and can start one each cycle: three streams over
// three blocks side by side run about three times as fast as one (M. Adler's method). Each
// block's CRC is then moved past the blocks after it by multiplying with x^(8 * block size)
// mod P (the `zeros` tables: a CRC register followed by that many zero bytes) and combined.
enum { LONG_BLOCK = 8192, SHORT_BLOCK = 256 };
static uint32_t zeros_long[4][256];
static uint32_t zeros_short[4][256];

// The operator that runs a CRC register over `bytes` zero bytes (a power of two).
static void zeros_operator(uint32_t *even, size_t bytes) {
    uint32_t odd[32];
    odd[0] = 0x82F63B78u;   // one zero bit
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    gf2_square(even, odd);   // two zero bits
    gf2_square(odd, even);   // four
    do {
        gf2_square(even, odd);   // one zero byte, then four, ...
        bytes >>= 1;
        if (bytes == 0) return;
        gf2_square(odd, even);   // two zero bytes, then eight, ...
        bytes >>= 1;
    } while (bytes);
    memcpy(even, odd, sizeof odd);
}

static void zeros_table(uint32_t zeros[4][256], size_t bytes) {
    uint32_t op[32];
    zeros_operator(op, bytes);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_times(op, n);
        zeros[1][n] = gf2_times(op, n << 8);
        zeros[2][n] = gf2_times(op, n << 16);
        zeros[3][n] = gf2_times(op, n << 24);
    }
}

static uint32_t shifted(uint32_t zeros[4][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static inline uint64_t load64(const unsigned char *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

// Three blocks of `block` bytes side by side, their CRCs combined: the register after them all.
__attribute__((target("sse4.2"), always_inline))
static inline uint64_t three_blocks(uint64_t c0, const unsigned char *p, size_t block, uint32_t zeros[4][256]) {
    uint64_t c1 = 0, c2 = 0;
    for (const unsigned char *end = p + block; p < end; p += 8) {
        c0 = _mm_crc32_u64(c0, load64(p));
        c1 = _mm_crc32_u64(c1, load64(p + block));
        c2 = _mm_crc32_u64(c2, load64(p + 2 * block));
    }
    c0 = shifted(zeros, (uint32_t)c0) ^ (uint32_t)c1;
    return shifted(zeros, (uint32_t)c0) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2")))
static uint32_t accelerated(uint32_t crc, const unsigned char *p, size_t len) {
    uint64_t c0 = crc;
    for (; len >= 3 * LONG_BLOCK; p += 3 * LONG_BLOCK, len -= 3 * LONG_BLOCK) c0 = three_blocks(c0, p, LONG_BLOCK, zeros_long);
    for (; len >= 3 * SHORT_BLOCK; p += 3 * SHORT_BLOCK, len -= 3 * SHORT_BLOCK) c0 = three_blocks(c0, p, SHORT_BLOCK, zeros_short);
    while (len >= 8) {
        c0 = _mm_crc32_u64(c0, load64(p));
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c0;
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static void init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    hardware = __builtin_cpu_supports("sse4.2");
    zeros_table(zeros_long, LONG_BLOCK);
    zeros_table(zeros_short, SHORT_BLOCK);
#endif
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

uint32_t hoist_crc32c_update(uint32_t crc, const void *buf, size_t len) {
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) init();
    crc = ~crc;
#if defined(__x86_64__)
    if (hardware) return ~accelerated(crc, buf, len);
#endif
    return ~software(crc, buf, len);
}

int hoist_crc32c_hardware(void) {
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) init();
    return hardware;
}

uint32_t hoist_crc32c_update_software(uint32_t crc, const void *buf, size_t len) {
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) init();
    return ~software(~crc, buf, len);
}

uint32_t hoist_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    // zlib's crc32_combine for the Castagnoli polynomial: crc1 moved past len2 zero bytes
    // (squaring the one-zero-bit operator to 1, 2, 4, ... bytes), then crc2 added.
    if (len2 == 0) return crc1;
    uint32_t even[32], odd[32];
    odd[0] = 0x82F63B78u;
    for (int n = 1; n < 32; n++) odd[n] = 1u << (n - 1);
    gf2_square(even, odd);   // two zero bits
    gf2_square(odd, even);   // four
    do {
        gf2_square(even, odd);   // one zero byte, then four, ...
        if (len2 & 1) crc1 = gf2_times(even, crc1);
        len2 >>= 1;
        if (len2 == 0) break;
        gf2_square(odd, even);   // two zero bytes, then eight, ...
        if (len2 & 1) crc1 = gf2_times(odd, crc1);
        len2 >>= 1;
    } while (len2);
    return crc1 ^ crc2;
}
