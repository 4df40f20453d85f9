/*
 * passwd_hash.c: the bytes under a password file entry: base64 (strict,
 * our own: OpenSSL's BIO decoder accepts what we would rather refuse) and
 * the two digests Mosquitto 2 checks, from libcrypto:
 *   $6$  SHA-512 over the password, then the 12 salt bytes
 *   $7$  PBKDF2-HMAC-SHA512(password, the 12 salt bytes, iterations), 64 bytes
 * (checked against Debian's mosquitto_passwd 2.0.11 output: the file
 * tests/data/auth/passwd says how). auth_passwd_hash writes a `$7$` entry.
 *
 * Ours rather than Mosquitto's: libmosquitto has no password code (auth.h).
 */
#include "gateway/auth/auth_int.h"

#include <limits.h>
#include <stdio.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool auth__b64_decode(const char *s, size_t len, uint8_t *out, size_t outlen)
{
    size_t pad = 0;
    while (pad < 2 && len > 0 && s[len - 1] == '=') {
        len--;
        pad++;
    }
    if (len % 4 == 1 || (pad && (len + pad) % 4 != 0))
        return false;
    size_t n = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
    if (n != outlen)
        return false;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0)
            return false;
        acc = ((acc << 6) | (uint32_t)v) & 0xffffffu;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o == outlen;
}

bool auth__pw_digest(auth__pw_kind_t kind, unsigned iterations, const uint8_t salt[AUTH__SALT_LEN],
                     const uint8_t *password, size_t password_len, uint8_t out[AUTH__HASH_LEN])
{
    static const uint8_t none[1];
    if (password_len > INT_MAX)
        return false;
    if (!password)
        password = none;
    if (kind == AUTH__PW_PBKDF2) {
        if (iterations < 1 || iterations > INT_MAX)
            return false;
        return PKCS5_PBKDF2_HMAC((const char *)password, (int)password_len, salt, AUTH__SALT_LEN, (int)iterations,
                                 EVP_sha512(), AUTH__HASH_LEN, out) == 1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned n = 0;
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha512(), NULL) == 1 &&
              EVP_DigestUpdate(ctx, password, password_len) == 1 &&
              EVP_DigestUpdate(ctx, salt, AUTH__SALT_LEN) == 1 && EVP_DigestFinal_ex(ctx, out, &n) == 1 &&
              n == AUTH__HASH_LEN;
    EVP_MD_CTX_free(ctx);
    return ok;
}

int auth_passwd_hash(const uint8_t *password, size_t password_len, unsigned iterations, char *out, size_t outlen)
{
    /* "$7$" ITER "$" 16 base64 "$" 88 base64, NUL */
    char digits[16];
    int dl = snprintf(digits, sizeof digits, "%u", iterations);
    if (!out || iterations < 1 || iterations > INT_MAX || (size_t)dl + 3 + 1 + 16 + 1 + 88 + 1 > outlen)
        return -1;
    uint8_t salt[AUTH__SALT_LEN], hash[AUTH__HASH_LEN];
    if (RAND_bytes(salt, sizeof salt) != 1 ||
        !auth__pw_digest(AUTH__PW_PBKDF2, iterations, salt, password, password_len, hash))
        return -1;
    char salt64[4 * ((AUTH__SALT_LEN + 2) / 3) + 1], hash64[4 * ((AUTH__HASH_LEN + 2) / 3) + 1];
    EVP_EncodeBlock((unsigned char *)salt64, salt, sizeof salt);
    EVP_EncodeBlock((unsigned char *)hash64, hash, sizeof hash);
    OPENSSL_cleanse(hash, sizeof hash);
    int n = snprintf(out, outlen, "$7$%s$%s$%s", digits, salt64, hash64);
    return n > 0 && (size_t)n < outlen ? n : -1;
}
