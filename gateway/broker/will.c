/*
 * will.c: will messages. When a connection ends without a DISCONNECT (or
 * with MQTT 5's "Disconnect with Will Message"), its will is published
 * through the same routing, schema policy and log as any PUBLISH: Sparkplug
 * NDEATH depends on it. MQTT 5's Will Delay Interval is honoured: the will
 * waits in the session, and a reconnect before it runs out cancels it
 * [MQTT-3.1.3-9]; it never waits longer than the session lives.
 *
 * A delayed will is journaled (journal.c, WILL and WILL_DONE) with the wall
 * clock it is due at: a will pending at SIGTERM or SIGKILL is published
 * after the restart when due (it used to be lost: 0 after a restart). A
 * shutdown drops the in-memory one without a WILL_DONE, so the journal keeps
 * it. Its payload is bounded by mqtt.max_payload_size (checked at CONNECT)
 * and it lives in a persistent session, so mqtt.max_sessions bounds how many.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

static void store(broker_t *srv, const char *client_id, const char *topic, const uint8_t *payload,
                  size_t len, uint8_t qos, bool retain, const wal_attr_t *extra, size_t nextra)
{
    router_match_t m;
    size_t tlen = strlen(topic);
    const broker_gen_t *g = srv->gen; /* read once (RELOAD.md 2.4): a delayed will is routed by the generation
                                         in force when it fires */
    int rule = router_match(g->router, topic, tlen, &m);
    if (rule < 0) {
        srv->unmatched_dropped++;
        tb_warn("will message to a topic no mapping matches: not stored", TB_S("client", client_id));
        return;
    }
    broker_topic_t *t = srv->topics[g->topic_of[m.topic_id]];
    t->received++;
    if (g->rules[rule].policy == CFG_POLICY_ENFORCE) {
        char why[256];
        if (!t->validator) {
            t->rejected[BROKER_REJ_NOT_READY]++;
            tb_warn("will message for a topic whose schema is not resolved: not stored", TB_S("client", client_id),
                    TB_S("topic", t->name));
            return;
        }
        if (sch_validate(t->validator, payload, len, why, sizeof why) != 0) {
            t->rejected[BROKER_REJ_INVALID]++;
            tb_warn("will message refused by schema", TB_S("client", client_id), TB_S("topic", t->name),
                    TB_S("why", why));
            return;
        }
    }
    wal_attr_t attrs[BROKER_MAX_ATTRS];
    size_t n = 0, it = 0;
    const char *name;
    router_slice_t v;
    while (n < BROKER_MAX_ATTRS && router_attr_next(g->router, &m, &it, &name, &v))
        attrs[n++] = (wal_attr_t){ (const uint8_t *)name, strlen(name), (const uint8_t *)v.p, v.len };
    if (n + nextra + 2 > BROKER_MAX_ATTRS) { /* as a PUBLISH would be (0x83): refused, never cut */
        t->rejected[BROKER_REJ_TOO_LARGE]++;
        tb_warn("will message with more attributes than a record holds: not stored", TB_S("client", client_id),
                TB_S("topic", t->name), TB_U("attributes", n + nextra + 2), TB_U("max", BROKER_MAX_ATTRS));
        return;
    }
    for (size_t i = 0; i < nextra; i++)
        attrs[n++] = extra[i];
    attrs[n++] = (wal_attr_t){ (const uint8_t *)"mqtt.will", 9, (const uint8_t *)"true", 4 };
    if (retain)
        attrs[n++] = (wal_attr_t){ (const uint8_t *)"mqtt.retain", 11, (const uint8_t *)"true", 4 };
    broker_msg_t msg = { payload, len, attrs, n, topic, tlen, qos, retain };
    if (broker__ingest(t, &msg, NULL, NULL) < 0) {
        t->rejected[BROKER_REJ_QUOTA]++;
        tb_error("will message could not be stored: the topic's log is failing", TB_S("client", client_id),
                 TB_S("topic", t->name));
    }
}

static void will_free(uv_handle_t *h)
{
    broker_will_t *w = h->data; /* the broker may be gone (its close frees it first): touch only w */
    free(w->client_id);
    free(w->topic);
    free(w->payload);
    for (size_t i = 0; i < w->nattrs; i++) {
        free((void *)w->attrs[i].key);
        free((void *)w->attrs[i].val);
    }
    free(w->attrs);
    free(w);
}

static void will_fire(uv_timer_t *h)
{
    broker_will_t *w = h->data;
    store(w->srv, w->client_id, w->topic, w->payload, w->len, w->qos, w->retain, w->attrs, w->nattrs);
    if (w->journaled && w->session)
        broker__journal_will_done(w->srv, w->session); /* published: not again after a restart */
    if (w->session)
        w->session->will = NULL;
    w->srv->will_bytes -= w->bytes;
    uv_close((uv_handle_t *)&w->timer, will_free);
}

void broker__will_drop(broker_session_t *s)
{
    broker_will_t *w = s->will;
    if (!w)
        return;
    s->will = NULL;
    w->srv->will_bytes -= w->bytes;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, will_free);
}

void broker__will_cancel(broker_session_t *s)
{
    broker_will_t *w = s->will;
    if (!w)
        return;
    if (w->journaled)
        broker__journal_will_done(w->srv, s);
    broker__will_drop(s);
}

static void arm(broker_will_t *w, uint64_t in_ms)
{
    /* libuv counts a timer from the loop's cached clock; at a restore that
     * clock is from before the recovery (hundreds of ms on a slow card or
     * under ASan), and the will would go that much before it is due. */
    uv_update_time(w->srv->loop);
    uv_timer_init(w->srv->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, will_fire, in_ms, 0);
}

void broker__will_restore(broker_t *srv, broker_session_t *s, uint64_t due_wall_ms, const char *topic, size_t tlen,
                          const uint8_t *payload, size_t len, uint8_t qos, bool retain, const wal_record_t *r)
{
    broker__will_drop(s);
    broker_will_t *w = tb_calloc(1, sizeof *w);
    w->srv = srv;
    w->session = s;
    w->client_id = tb_strdup(s->client_id);
    w->topic = tb_strndup(topic, tlen);
    w->payload = tb_malloc(len ? len : 1);
    memcpy(w->payload, payload, len);
    w->len = len;
    w->qos = qos;
    w->retain = retain;
    w->due_wall_ms = due_wall_ms;
    w->journaled = true;
    size_t pos = 0, n = 0;
    wal_attr_t a;
    while (wal_record_attr_next(r, &pos, &a))
        n++;
    w->attrs = tb_calloc(n ? n : 1, sizeof *w->attrs);
    pos = 0;
    while (w->nattrs < n && wal_record_attr_next(r, &pos, &a)) {
        uint8_t *k = tb_malloc(a.key_len + 1), *v = tb_malloc(a.val_len + 1);
        memcpy(k, a.key, a.key_len);
        memcpy(v, a.val, a.val_len);
        w->attrs[w->nattrs++] = (wal_attr_t){ k, a.key_len, v, a.val_len };
        w->bytes += a.key_len + a.val_len;
    }
    /* promised before the restart: counted, never refused */
    w->bytes += tlen + len;
    srv->will_bytes += w->bytes;
    s->will = w;
    uint64_t now = tb_wall_ms();
    arm(w, due_wall_ms > now ? due_wall_ms - now : 0);
}

void broker__publish_will(broker_t *srv, broker_conn_t *c)
{
    broker_session_t *s = c->session;
    broker_conn_will_t *cw = c->will;
    uint32_t delay = cw->delay_s;
    if (s && s->expiry_s < delay)
        delay = s->expiry_s; /* the will goes when the session ends, if sooner */
    if (delay == 0 || !s || srv->draining) {
        store(srv, c->client_id, cw->topic, cw->payload, cw->len, cw->qos, cw->retain, cw->attrs, cw->nattrs);
        return;
    }
    broker__will_cancel(s);
    broker_will_t *w = tb_calloc(1, sizeof *w);
    w->srv = srv;
    w->session = s;
    w->client_id = tb_strdup(c->client_id);
    w->topic = cw->topic;
    w->payload = cw->payload;
    w->len = cw->len;
    w->qos = cw->qos;
    w->retain = cw->retain;
    w->attrs = cw->attrs;
    w->nattrs = cw->nattrs;
    w->bytes = cw->bytes; /* it moves to the session with the will */
    cw->bytes = 0;
    cw->topic = NULL;
    cw->payload = NULL;
    cw->attrs = NULL;
    cw->nattrs = 0;
    w->due_wall_ms = tb_wall_ms() + (uint64_t)delay * 1000u;
    s->will = w;
    broker__journal_will(srv, s); /* sets w->journaled when the session is journaled */
    arm(w, (uint64_t)delay * 1000u);
}
