/*
 * helper_cert.c: a self-signed certificate made in process with libcrypto,
 * for the unit tests of gateway/tls and of the folders that use it (the
 * broker's TLS transport, the HTTP endpoint, the CLI's HTTPS client borrow
 * it: tests/CMakeLists.txt).
 */
#include "helper_cert.h"

#include <criterion/criterion.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>

void hc_make_cert(const char *dir, const char *name, const char *cn, char *cert, char *key)
{
    snprintf(cert, 128, "%s/%s.pem", dir, name);
    snprintf(key, 128, "%s/%s.key", dir, name);
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    cr_assert_not_null(pk);
    X509 *x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pk);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, n);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    cr_assert(X509_sign(x, pk, EVP_sha256()) > 0);
    FILE *f = fopen(cert, "w");
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key, "w");
    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pk);
}
