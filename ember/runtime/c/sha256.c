/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written from the specifications. */
#include "sha256.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
        uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        uint32_t t1 = v[7] + s1 + ch + K[i] + w[i];
        uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
        uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + s0 + maj;
    }
    for (int i = 0; i < 8; i++) h[i] += v[i];
}

void ember_sha256_init(ember_sha256 *s) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->state, H0, sizeof H0);
    s->bytes = 0;
    s->used = 0;
}

void ember_sha256_update(ember_sha256 *s, const void *data, size_t n) {
    const unsigned char *p = data;
    s->bytes += n;
    while (n > 0) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used == 64) {
            compress(s->state, s->block);
            s->used = 0;
        }
    }
}

void ember_sha256_final(ember_sha256 *s, unsigned char out[32]) {
    uint64_t bits = s->bytes * 8;
    unsigned char pad = 0x80, zero = 0, length[8];
    ember_sha256_update(s, &pad, 1);
    while (s->used != 56) ember_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)(bits >> (56 - 8 * i));
    ember_sha256_update(s, length, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->state[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->state[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->state[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->state[i];
    }
}

void ember_hmac_sha256(const unsigned char *key, size_t key_n, const void *a, size_t a_n,
                       const void *b, size_t b_n, unsigned char out[32]) {
    unsigned char k[64] = {0}, pad[64], inner[32];
    ember_sha256 s;
    if (key_n > 64) { /* a long key is hashed first */
        ember_sha256_init(&s);
        ember_sha256_update(&s, key, key_n);
        ember_sha256_final(&s, k);
    } else {
        memcpy(k, key, key_n);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    ember_sha256_init(&s);
    ember_sha256_update(&s, pad, 64);
    ember_sha256_update(&s, a, a_n);
    ember_sha256_update(&s, b, b_n);
    ember_sha256_final(&s, inner);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    ember_sha256_init(&s);
    ember_sha256_update(&s, pad, 64);
    ember_sha256_update(&s, inner, 32);
    ember_sha256_final(&s, out);
}
