/*
 * session.c: MQTT sessions by client identifier.
 *
 * An ingest gateway keeps very little per session: no subscriptions, no
 * queued messages. What it must keep is (a) that a persistent session
 * exists, so a reconnecting client hears Session Present = 1 and resends
 * what it had in flight instead of discarding it, and (b) for QoS 2, the
 * packet identifiers stored and PUBRECed but not yet released by PUBREL,
 * so a resend is answered with PUBREC without storing the message twice
 * [MQTT-4.3.3-10].
 *
 * Persistent sessions live in memory until they expire
 * (mqtt.max_session_expiry_s caps every expiry, 3.1.1's "forever"
 * included) or mqtt.max_sessions pushes out the one detached longest, and
 * in the session journal (journal.c) so they survive a restart.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 16777619u;
    }
    return h;
}

static void grow(broker_t *srv)
{
    uint32_t nb = srv->sess_nbuckets ? srv->sess_nbuckets * 2 : 1024;
    broker_session_t **b = tb_calloc(nb, sizeof *b);
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i], *next; s; s = next) {
            next = s->hnext;
            uint32_t k = hash(s->client_id) & (nb - 1);
            s->hnext = b[k];
            b[k] = s;
        }
    }
    free(srv->sess_buckets);
    srv->sess_buckets = b;
    srv->sess_nbuckets = nb;
}

broker_session_t *broker__session_find(broker_t *srv, const char *client_id)
{
    if (!srv->sess_nbuckets)
        return NULL;
    for (broker_session_t *s = srv->sess_buckets[hash(client_id) & (srv->sess_nbuckets - 1)]; s; s = s->hnext)
        if (strcmp(s->client_id, client_id) == 0)
            return s;
    return NULL;
}

static void session_free(broker_session_t *s)
{
    free(s->client_id);
    free(s->qos2);
    free(s->qos2_rt);
    free(s->storing);
    free(s);
}

void broker__session_set_persistent(broker_t *srv, broker_session_t *s, bool persistent)
{
    if (s->persistent == persistent)
        return;
    s->persistent = persistent;
    if (persistent)
        srv->npersistent++;
    else
        srv->npersistent--;
}

static void unlink_session(broker_t *srv, broker_session_t *s)
{
    broker__journal_session(srv, s, false); /* END, if it was journaled */
    broker_session_t **pp = &srv->sess_buckets[hash(s->client_id) & (srv->sess_nbuckets - 1)];
    while (*pp && *pp != s)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = s->hnext;
    s->linked = false;
    srv->nsessions--;
    broker__session_set_persistent(srv, s, false);
    broker__will_cancel(s);
    if (s->refs == 0)
        session_free(s);
}

broker_session_t *broker__session_create(broker_t *srv, const char *client_id)
{
    if (srv->nsessions + 1 > srv->sess_nbuckets)
        grow(srv);
    broker_session_t *s = tb_calloc(1, sizeof *s);
    s->client_id = tb_strdup(client_id);
    uint32_t k = hash(client_id) & (srv->sess_nbuckets - 1);
    s->hnext = srv->sess_buckets[k];
    srv->sess_buckets[k] = s;
    s->linked = true;
    srv->nsessions++;
    return s;
}

broker_session_t *broker__session_attach(broker_t *srv, broker_conn_t *c, bool clean, uint32_t expiry_s, bool *present)
{
    *present = false;
    broker_session_t *s = broker__session_find(srv, c->client_id);
    if (s && s->conn) {
        static tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, BROKER_CONN_LOG_BURST);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_info("session taken over", TB_S("client", c->client_id), TB_S("old_peer", broker__conn_peer(s->conn)),
                    TB_S("new_peer", broker__conn_peer(c)), TB_U("suppressed", skipped));
        broker__conn_close(s->conn, MQTT_RC_SESSION_TAKEN_OVER, "session taken over by a new connection");
        s = broker__session_find(srv, c->client_id); /* a non-persistent one is gone now */
    }
    if (s && clean) {
        unlink_session(srv, s);
        s = NULL;
    }
    if (s) {
        *present = s->persistent;
        broker__will_cancel(s); /* back before its will delay ran out: no will */
    } else {
        s = broker__session_create(srv, c->client_id);
    }
    s->conn = c;
    if (c->client_id != s->client_id) { /* one copy of the identifier: the session's (it outlives c's use) */
        free(c->client_id);
        c->client_id = s->client_id;
        c->client_id_shared = true;
    }
    bool was = s->journaled;
    uint32_t old_expiry = s->expiry_s;
    broker__session_set_persistent(srv, s, expiry_s > 0);
    s->expiry_s = expiry_s;
    if (s->persistent && (!was || old_expiry != expiry_s || s->detach_journaled))
        broker__journal_session(srv, s, true);  /* OPEN: it exists, with this expiry */
    else if (!s->persistent && was)
        broker__journal_session(srv, s, false); /* END: no longer persistent */
    return s;
}

void broker__session_detach(broker_t *srv, broker_conn_t *c)
{
    broker_session_t *s = c->session;
    if (!s)
        return;
    c->session = NULL;
    s->conn = NULL;
    if (!s->persistent || s->expiry_s == 0) {
        if (s->linked)
            unlink_session(srv, s);
        return;
    }
    s->detached_ms = uv_now(srv->loop);
    s->detached_wall_ms = tb_wall_ms();
    broker__journal_detached(srv, s); /* its expiry runs from now, across restarts */
}

void broker__session_expire(broker_t *srv, uint64_t now)
{
    broker_session_t *oldest = NULL;
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i], *next; s; s = next) {
            next = s->hnext;
            if (s->conn || s->will)
                continue; /* a pending will is published first, then the session may go */
            if (now - s->detached_ms >= (uint64_t)s->expiry_s * 1000u) {
                unlink_session(srv, s);
                continue;
            }
            if (!oldest || s->detached_ms < oldest->detached_ms)
                oldest = s;
        }
    }
    if (srv->npersistent > srv->cfg->mqtt.max_sessions && oldest) { /* after a reload lowered it */
        tb_warn("mqtt.max_sessions reached: forgetting the session idle longest",
                TB_S("client", oldest->client_id), TB_U("max_sessions", srv->cfg->mqtt.max_sessions));
        unlink_session(srv, oldest);
    }
}

void broker__session_forget(broker_t *srv, broker_session_t *s)
{
    if (s->linked)
        unlink_session(srv, s);
}

void broker__session_unref(broker_session_t *s)
{
    if (--s->refs == 0 && !s->linked)
        session_free(s);
}

void broker__sessions_free(broker_t *srv)
{
    for (uint32_t i = 0; i < srv->sess_nbuckets; i++) {
        for (broker_session_t *s = srv->sess_buckets[i], *next; s; s = next) {
            next = s->hnext;
            broker__will_drop(s); /* shutdown: a journaled will is published after the restart */
            session_free(s);
        }
    }
    free(srv->sess_buckets);
    srv->sess_buckets = NULL;
    srv->sess_nbuckets = srv->nsessions = srv->npersistent = 0;
}

bool broker__session_has_qos2(const broker_session_t *s, uint16_t id)
{
    for (uint32_t i = 0; i < s->nqos2; i++)
        if (s->qos2[i] == id)
            return true;
    return false;
}

void broker__session_add_qos2_at(broker_session_t *s, uint16_t id, bool runtime)
{
    if (broker__session_has_qos2(s, id))
        return;
    if (s->nqos2 == s->cap_qos2) {
        s->cap_qos2 = s->cap_qos2 ? s->cap_qos2 * 2 : 8;
        s->qos2 = tb_realloc(s->qos2, s->cap_qos2 * sizeof *s->qos2);
        s->qos2_rt = tb_realloc(s->qos2_rt, s->cap_qos2 * sizeof *s->qos2_rt);
    }
    s->qos2_rt[s->nqos2] = runtime;
    s->qos2[s->nqos2++] = id;
}

void broker__session_add_qos2(broker_session_t *s, uint16_t id)
{
    broker__session_add_qos2_at(s, id, false);
}

bool broker__session_del_qos2_at(broker_session_t *s, uint16_t id, bool *runtime)
{
    for (uint32_t i = 0; i < s->nqos2; i++) {
        if (s->qos2[i] == id) {
            if (runtime)
                *runtime = s->qos2_rt[i];
            s->nqos2--;
            s->qos2[i] = s->qos2[s->nqos2];
            s->qos2_rt[i] = s->qos2_rt[s->nqos2];
            return true;
        }
    }
    return false;
}

bool broker__session_del_qos2(broker_session_t *s, uint16_t id)
{
    return broker__session_del_qos2_at(s, id, NULL);
}

struct broker_pending *broker__session_storing(const broker_session_t *s, uint16_t id)
{
    for (uint32_t i = 0; i < s->nstoring; i++)
        if (s->storing[i].id == id)
            return s->storing[i].p;
    return NULL;
}

void broker__session_set_storing(broker_session_t *s, uint16_t id, struct broker_pending *p)
{
    for (uint32_t i = 0; i < s->nstoring; i++) {
        if (s->storing[i].id == id) {
            if (p)
                s->storing[i].p = p;
            else
                s->storing[i] = s->storing[--s->nstoring];
            return;
        }
    }
    if (!p)
        return;
    if (s->nstoring == s->cap_storing) {
        s->cap_storing = s->cap_storing ? s->cap_storing * 2 : 8;
        s->storing = tb_realloc(s->storing, s->cap_storing * sizeof *s->storing);
    }
    s->storing[s->nstoring].id = id;
    s->storing[s->nstoring].p = p;
    s->nstoring++;
}
