/*
 * helper_cert.h: test certificates for the unit tests (helper_cert.c).
 */
#ifndef TEST_HELPER_CERT_H
#define TEST_HELPER_CERT_H

/* A self-signed EC P-256 certificate for 127.0.0.1 (CN cn, SAN IP:127.0.0.1)
 * written to dir/name.pem and dir/name.key; the paths in cert and key (128
 * bytes each). Its own CA: a client trusts it with cafile = cert. */
void hc_make_cert(const char *dir, const char *name, const char *cn, char *cert, char *key);

#endif
