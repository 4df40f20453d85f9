/* tls_int.h: what tls_ctx.c and tls_stream.c share (internal). Prefix tls__. */
#ifndef TLS_TLS_INT_H
#define TLS_TLS_INT_H

#include "gateway/tls/tls.h"

#include <openssl/ssl.h>

/* The SSL_CTX of t (no reference taken: an SSL made from it takes OpenSSL's). */
SSL_CTX *tls__ssl_ctx(tls_ctx_t *t);
/* The CN of x's subject, malloc'd; NULL when it has none (or one with a NUL). */
char *tls__common_name(X509 *x);

#endif
