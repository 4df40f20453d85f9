/*
 * tls_ctx.c: the TLS listeners' certificates (broker.h: broker_tls_*). One
 * OpenSSL SSL_CTX per listener with a `tls` mapping, built from its keys:
 * the certificate chain and key (checked to match), the CAs that client
 * certificates are verified against, the oldest version, the TLS 1.2
 * cipher list; tls.c makes each connection's SSL from the listener's
 * context of the moment.
 *
 * Loading is separate from use so that a file that does not load is a
 * configuration error before anything changes: at start (`tributary check`
 * and `run` exit 2, naming the key and the file) and at SIGHUP, where the
 * contexts in force stay (gateway/reload.c). A context is reference
 * counted: its listener holds one; an SSL holds its SSL_CTX itself
 * (OpenSSL's count), so a connection established before a reload keeps the
 * certificate it was made with, while the next handshake uses the new one.
 *
 * Every context: SSL_MODE_RELEASE_BUFFERS (an idle connection gives its
 * record buffers back), a server session cache of SESSION_CACHE entries and
 * one TLS 1.3 ticket per handshake (resumption, bounded), no renegotiation
 * (a client-driven CPU cost with no use here), the server's cipher order.
 */
#include "gateway/broker/broker_int.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_CACHE 1024

struct broker_tls {
    struct broker_tls_ctx *ctx[BROKER_MAX_LISTENERS]; /* by listener index; NULL: plain */
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

char *broker__tls_common_name(X509 *x)
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

static void describe_cert(struct broker_tls_ctx *t)
{
    X509 *x = SSL_CTX_get0_certificate(t->ctx);
    char *cn = broker__tls_common_name(x);
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

/* Listener i's context from its keys; NULL with err naming key and file. */
static struct broker_tls_ctx *ctx_new(const cfg_listener_t *l, size_t i, char *err, size_t errlen)
{
    const struct cfg_listener_tls *k = &l->tls;
    char why[256], key[64];
#define FAIL(key_, file_, ...)                                                                     \
    do {                                                                                           \
        char m_[512];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        snprintf(key, sizeof key, "mqtt.listeners[%zu].tls.%s", i, key_);                          \
        if (file_)                                                                                 \
            snprintf(err, errlen, "%s (line %d): %s: %s", key, l->line, (const char *)(file_), m_); \
        else                                                                                       \
            snprintf(err, errlen, "%s (line %d): %s", key, l->line, m_);                           \
        SSL_CTX_free(ctx);                                                                         \
        return NULL;                                                                               \
    } while (0)
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "mqtt.listeners[%zu].tls: cannot make a TLS context: %s", i, ssl_why(why, sizeof why));
        return NULL;
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
        FAIL("ciphers", NULL, "\"%s\": no cipher matches it (`openssl ciphers '%s'` lists what does)", k->ciphers,
             k->ciphers);
    SSL_CTX_set_min_proto_version(ctx, k->min_version == CFG_TLS_1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, SESSION_CACHE);
    SSL_CTX_set_num_tickets(ctx, 1);
    /* required for resumption once client certificates are verified; one per listener */
    char sid[32];
    int sn = snprintf(sid, sizeof sid, "tributary-mqtt-%zu", i);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)sid, (unsigned)sn);
#undef FAIL
    struct broker_tls_ctx *t = tb_calloc(1, sizeof *t);
    t->ctx = ctx;
    t->refs = 1;
    t->use_identity = k->use_identity_as_username;
    t->require_cert = k->require_client_cert;
    t->cert_file = tb_strdup(k->cert_file);
    describe_cert(t);
    return t;
}

void broker__tls_ctx_unref(struct broker_tls_ctx *t)
{
    if (!t || --t->refs > 0)
        return;
    SSL_CTX_free(t->ctx);
    free(t->cert_file);
    free(t);
}

int broker_tls_load(const cfg_t *cfg, broker_tls_t **out, char *err, size_t errlen)
{
    *out = NULL;
    broker_tls_t *set = NULL;
    for (size_t i = 0; i < cfg->mqtt.nlisteners && i < BROKER_MAX_LISTENERS; i++) {
        const cfg_listener_t *l = &cfg->mqtt.listeners[i];
        if (!l->has_tls)
            continue;
        if (!set)
            set = tb_calloc(1, sizeof *set);
        set->ctx[i] = ctx_new(l, i, err, errlen);
        if (!set->ctx[i]) {
            broker_tls_free(set);
            return TB_ECONFIG;
        }
    }
    *out = set;
    return 0;
}

void broker_tls_free(broker_tls_t *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < BROKER_MAX_LISTENERS; i++)
        broker__tls_ctx_unref(set->ctx[i]);
    free(set);
}

size_t broker_tls_count(const broker_tls_t *set)
{
    size_t n = 0;
    for (size_t i = 0; set && i < BROKER_MAX_LISTENERS; i++)
        n += set->ctx[i] != NULL;
    return n;
}

void broker_set_tls(broker_t *srv, broker_tls_t *set)
{
    broker__set_listeners(srv);
    for (uint32_t i = 0; set && i < srv->nlisteners; i++) {
        struct broker_tls_ctx *t = set->ctx[i];
        if (!t)
            continue;
        broker_listener_t *l = &srv->listeners[i];
        bool reload = l->tls != NULL;
        broker__tls_ctx_unref(l->tls); /* connections made with it keep their SSL_CTX */
        l->tls = t;
        l->tp = &broker__tls;
        set->ctx[i] = NULL;
        if (t->expired)
            tb_warn("mqtt TLS certificate has expired: clients that check it will refuse the handshake",
                    TB_U("listener", i), TB_S("cert_file", t->cert_file), TB_S("subject", t->subject),
                    TB_S("not_after", t->not_after));
        else
            tb_info(reload ? "mqtt TLS certificate reloaded" : "mqtt TLS certificate", TB_U("listener", i),
                    TB_S("cert_file", t->cert_file), TB_S("subject", t->subject), TB_S("not_after", t->not_after),
                    TB_B("client_cert_required", t->require_cert));
    }
    broker_tls_free(set);
}
