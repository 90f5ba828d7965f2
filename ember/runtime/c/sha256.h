/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the RPC server's authentication. */
#ifndef EMBER_SHA256_H
#define EMBER_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t state[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} ember_sha256;

void ember_sha256_init(ember_sha256 *s);
void ember_sha256_update(ember_sha256 *s, const void *data, size_t n);
void ember_sha256_final(ember_sha256 *s, unsigned char out[32]);
/* out = HMAC-SHA256(key, a || b) */
void ember_hmac_sha256(const unsigned char *key, size_t key_n, const void *a, size_t a_n,
                       const void *b, size_t b_n, unsigned char out[32]);

#endif
