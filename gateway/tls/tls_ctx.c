/*
 * tls_ctx.c: a server's TLS context from its `tls` keys (tls.h: tls_ctx_*),
 * for the MQTT listeners and the HTTP endpoint alike. Each file is opened
 * first so that one that cannot be says why in the OS's words, then read
 * by OpenSSL; a failure names the key and the file.
 */
#include "gateway/tls/tls_int.h"
#include "base/base.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tls_ctx {
    SSL_CTX *ctx;           /* each SSL made from it holds it too */
    int refs;
    bool require_cert;
    bool expired;
    char *cert_file;
    char subject[128];
    char not_after[64];
};

/* OpenSSL's reason for the last error of this thread, and the queue cleared. */
static const char *ssl_why(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, len, "%s", r ? r : e ? "unknown OpenSSL error" : "no reason given");
    ERR_clear_error();
    return buf;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1; /* an encrypted key does not load: say so instead of prompting on a terminal */
}

/* A file that cannot be opened says why in the OS's words, not OpenSSL's. */
static bool readable(const char *path, char *why, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, len, "%s", strerror(errno));
        return false;
    }
    fclose(f);
    return true;
}

char *tls__common_name(X509 *x)
{
    if (!x)
        return NULL;
    X509_NAME *name = X509_get_subject_name(x);
    int i = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
    if (i < 0)
        return NULL;
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
    char *cn = NULL;
    if (n > 0 && !memchr(utf8, '\0', (size_t)n))
        cn = tb_strndup((const char *)utf8, (size_t)n);
    OPENSSL_free(utf8);
    return cn;
}

static void describe_cert(tls_ctx_t *t)
{
    X509 *x = SSL_CTX_get0_certificate(t->ctx);
    char *cn = tls__common_name(x);
    snprintf(t->subject, sizeof t->subject, "%s", cn ? cn : "");
    free(cn);
    t->not_after[0] = '\0';
    t->expired = false;
    if (!x)
        return;
    const ASN1_TIME *na = X509_get0_notAfter(x);
    BIO *b = BIO_new(BIO_s_mem());
    if (b && ASN1_TIME_print(b, na)) {
        char *p;
        long n = BIO_get_mem_data(b, &p);
        snprintf(t->not_after, sizeof t->not_after, "%.*s", (int)TB_MIN(n, 63), p);
    }
    BIO_free(b);
    t->expired = X509_cmp_current_time(na) < 0;
}

/* An unencrypted PEM private key (no passphrase is ever asked: the gateway runs unattended). */
static EVP_PKEY *read_key(const char *path)
{
    BIO *b = BIO_new_file(path, "r");
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
    BIO_free(b);
    return k;
}

int tls_ctx_load(const cfg_tls_t *k, const char *key, int line, const char *sid, tls_ctx_t **out, char *err,
                 size_t errlen)
{
    char why[256], where[32] = "";
    *out = NULL;
    if (line > 0)
        snprintf(where, sizeof where, " (line %d)", line);
#define FAIL(field_, file_, ...)                                                                   \
    do {                                                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        if (file_)                                                                                 \
            snprintf(err, errlen, "%s.%s%s: %s: %s", key, field_, where, (const char *)(file_), m_); \
        else                                                                                       \
            snprintf(err, errlen, "%s.%s%s: %s", key, field_, where, m_);                          \
        SSL_CTX_free(ctx);                                                                         \
        return TB_ECONFIG;                                                                         \
    } while (0)
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "%s: cannot make a TLS context: %s", key, ssl_why(why, sizeof why));
        return TB_ECONFIG;
    }
    if (!readable(k->cert_file, why, sizeof why))
        FAIL("cert_file", k->cert_file, "cannot open: %s", why);
    if (SSL_CTX_use_certificate_chain_file(ctx, k->cert_file) != 1)
        FAIL("cert_file", k->cert_file, "no certificate could be loaded (PEM expected): %s", ssl_why(why, sizeof why));
    if (!readable(k->key_file, why, sizeof why))
        FAIL("key_file", k->key_file, "cannot open: %s", why);
    EVP_PKEY *pkey = read_key(k->key_file);
    if (!pkey)
        FAIL("key_file", k->key_file, "no private key could be loaded (unencrypted PEM expected): %s",
             ssl_why(why, sizeof why));
    int used = SSL_CTX_use_PrivateKey(ctx, pkey) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(pkey);
    if (!used)
        FAIL("key_file", k->key_file, "is not the key of tls.cert_file %s: %s", k->cert_file, ssl_why(why, sizeof why));
    if (*k->ca_file) {
        if (!readable(k->ca_file, why, sizeof why))
            FAIL("ca_file", k->ca_file, "cannot open: %s", why);
        if (SSL_CTX_load_verify_locations(ctx, k->ca_file, NULL) != 1)
            FAIL("ca_file", k->ca_file, "no CA certificate could be loaded (PEM expected): %s", ssl_why(why, sizeof why));
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(k->ca_file);
        if (!names)
            FAIL("ca_file", k->ca_file, "no CA certificate in it: %s", ssl_why(why, sizeof why));
        SSL_CTX_set_client_CA_list(ctx, names); /* what the CertificateRequest names: which certificate to send */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (k->require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    }
    if (*k->ciphers && SSL_CTX_set_cipher_list(ctx, k->ciphers) != 1)
        FAIL("ciphers", (const char *)NULL, "\"%s\": no cipher matches it (`openssl ciphers '%s'` lists what does)",
             k->ciphers, k->ciphers);
    SSL_CTX_set_min_proto_version(ctx, k->min_version == CFG_TLS_1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
    /* no SSL_MODE_RELEASE_BUFFERS: it frees and allocates the 16 KB read
     * buffer around every record (5.8% of a 100-byte PUBLISH's instructions);
     * tls_stream_release gives both buffers back once per read batch and
     * after each write, so an idle connection still holds none */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, TLS_SESSION_CACHE);
    SSL_CTX_set_num_tickets(ctx, 1);
    /* required for resumption once client certificates are verified; one per server */
    size_t sn = TB_MIN(strlen(sid), (size_t)SSL_MAX_SID_CTX_LENGTH);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)sid, (unsigned)sn);
#undef FAIL
    tls_ctx_t *t = tb_calloc(1, sizeof *t);
    t->ctx = ctx;
    t->refs = 1;
    t->require_cert = k->require_client_cert;
    t->cert_file = tb_strdup(k->cert_file);
    describe_cert(t);
    *out = t;
    return 0;
}

tls_ctx_t *tls_ctx_ref(tls_ctx_t *t)
{
    if (t)
        t->refs++;
    return t;
}

void tls_ctx_unref(tls_ctx_t *t)
{
    if (!t || --t->refs > 0)
        return;
    SSL_CTX_free(t->ctx);
    free(t->cert_file);
    free(t);
}

void tls_ctx_info(const tls_ctx_t *t, tls_ctx_info_t *out)
{
    *out = (tls_ctx_info_t){ t->cert_file, t->subject, t->not_after, t->expired, t->require_cert };
}

SSL_CTX *tls__ssl_ctx(tls_ctx_t *t)
{
    return t->ctx;
}
