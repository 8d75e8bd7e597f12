#include "hoist_checksum.h"
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

static uint32_t table[8][256];
static int ready = 0;
static int hardware = 0;

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
#endif
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

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

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t accelerated(uint32_t crc, const unsigned char *p, size_t len) {
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

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
