/*
 * tls_ctx.c: the TLS listeners' certificates (broker.h: broker_tls_*). One
 * context per listener with a `tls` mapping, built by gateway/tls from its
 * keys (tls_ctx_load: certificate chain and key checked to match, client
 * CAs, oldest version, TLS 1.2 ciphers); tls.c makes each connection's
 * stream from the listener's context of the moment.
 *
 * Loading is separate from use so that a file that does not load is a
 * configuration error before anything changes: at start (`tributary check`
 * and `run` exit 2, naming the key and the file) and at SIGHUP, where the
 * contexts in force stay (gateway/reload.c). A context is reference
 * counted: its listener holds one; an SSL holds its SSL_CTX itself, so a
 * connection established before a reload keeps the certificate it was
 * made with, while the next handshake uses the new one.
 */
#include "gateway/broker/broker_int.h"

#include <stdio.h>
#include <stdlib.h>

struct broker_tls {
    struct {
        tls_ctx_t *ctx;        /* NULL: plain */
        bool use_identity;     /* its tls.use_identity_as_username (a broker matter: gateway/tls knows no users) */
    } l[BROKER_MAX_LISTENERS]; /* by listener index */
};

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
        char key[48], sid[32];
        snprintf(key, sizeof key, "mqtt.listeners[%zu].tls", i);
        snprintf(sid, sizeof sid, "tributary-mqtt-%zu", i);
        if (tls_ctx_load(&l->tls, key, l->line, sid, &set->l[i].ctx, err, errlen) < 0) {
            broker_tls_free(set);
            return TB_ECONFIG;
        }
        set->l[i].use_identity = l->tls.use_identity_as_username;
    }
    *out = set;
    return 0;
}

void broker_tls_free(broker_tls_t *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < BROKER_MAX_LISTENERS; i++)
        tls_ctx_unref(set->l[i].ctx);
    free(set);
}

size_t broker_tls_count(const broker_tls_t *set)
{
    size_t n = 0;
    for (size_t i = 0; set && i < BROKER_MAX_LISTENERS; i++)
        n += set->l[i].ctx != NULL;
    return n;
}

void broker_set_tls(broker_t *srv, broker_tls_t *set)
{
    broker__set_listeners(srv);
    for (uint32_t i = 0; set && i < srv->nlisteners; i++) {
        tls_ctx_t *t = set->l[i].ctx;
        if (!t)
            continue;
        broker_listener_t *l = &srv->listeners[i];
        bool reload = l->tls != NULL;
        tls_ctx_unref(l->tls); /* connections made with it keep their SSL_CTX */
        l->tls = t;
        l->use_identity = set->l[i].use_identity;
        l->tp = &broker__tls;
        set->l[i].ctx = NULL;
        tls_ctx_info_t in;
        tls_ctx_info(t, &in);
        if (in.expired)
            tb_warn("mqtt TLS certificate has expired: clients that check it will refuse the handshake",
                    TB_U("listener", i), TB_S("cert_file", in.cert_file), TB_S("subject", in.subject),
                    TB_S("not_after", in.not_after));
        else
            tb_info(reload ? "mqtt TLS certificate reloaded" : "mqtt TLS certificate", TB_U("listener", i),
                    TB_S("cert_file", in.cert_file), TB_S("subject", in.subject), TB_S("not_after", in.not_after),
                    TB_B("client_cert_required", in.require_cert));
    }
    broker_tls_free(set);
}
