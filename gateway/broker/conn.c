/*
 * conn.c: one MQTT connection: reading and decoding, dispatch by packet
 * type, the ordered ack FIFO, writing, and closing. The bytes come and go
 * through the connection's transport (broker_int.h: tcp.c today), so
 * nothing here touches a socket.
 *
 * Memory per connection stays small while idle: reads land in one 64 KiB
 * buffer shared by the loop (server->readbuf), packets are processed from
 * there, and only an incomplete tail is copied into the connection's own
 * buffer, which grows to the size of that packet at most and is released
 * when the packet completes. Packet size is bounded by the codec from the
 * fixed header, before the body is buffered.
 *
 * Acks leave in arrival order: every QoS 1/2 PUBLISH gets a broker_pending_t at
 * the tail of the connection's FIFO; when its log batch completes it
 * becomes ready, and broker__conn_drain_acks() sends from the head while the
 * head is ready.
 *
 * Closing: the transport sends what is queued (so a CONNACK refusal or
 * DISCONNECT already written is delivered) and releases the socket; the
 * struct lives on while messages of this connection are still in the
 * log's hands (refs). A write the transport cannot make closes the
 * connection, logged and counted (close reason write_error): the acks it
 * carried are lost with it, so their messages, stored but unacknowledged,
 * are sent again by the client when it reconnects.
 */
#include "gateway/broker/broker_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static void list_remove(broker_t *srv, broker_conn_t *c)
{
    if (c->prev) c->prev->next = c->next;
    else srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    srv->nconns--;
}

broker_conn_t *broker__conn_new(broker_t *srv, const broker_transport_t *tp)
{
    broker_conn_t *c = tb_calloc(1, sizeof *c);
    c->srv = srv;
    c->tp = tp;
    c->refs = 1;
    return c;
}

void broker__addr_host(const broker_addr_t *a, char *out, size_t outlen)
{
    if (a->family == 0 || !inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->ip, out, (socklen_t)outlen))
        snprintf(out, outlen, "?");
}

const char *broker__conn_peer(const broker_conn_t *c)
{
    static char ring[4][64];
    static unsigned next;
    char *buf = ring[next++ % 4], host[48];
    broker__addr_host(&c->peer, host, sizeof host);
    if (c->peer.family == 0)
        snprintf(buf, sizeof ring[0], "?");
    else
        snprintf(buf, sizeof ring[0], c->peer.family == 6 ? "[%s]:%u" : "%s:%u", host, (unsigned)c->peer.port);
    return buf;
}

void broker__conn_start(broker_conn_t *c, const broker_addr_t *peer)
{
    broker_t *srv = c->srv;
    if (peer)
        c->peer = *peer;
    c->last_rx_ms = uv_now(srv->loop); /* accepted: the CONNECT timeout runs from here */
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    srv->conn_accepted++;
    c->listed = true;
    if (srv->nconns + srv->nreleasing > srv->max_connections + BROKER_REFUSAL_HEADROOM) {
        /* past the room kept for CONNACK refusals: not even read */
        srv->conn_refused[METRICS_REFUSE_MAX_CONNECTIONS]++;
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("connection refused at accept: mqtt.max_connections sockets are open or closing",
                    TB_S("peer", broker__conn_peer(c)), TB_U("max_connections", srv->max_connections),
                    TB_U("open", srv->nconns), TB_U("closing", srv->nreleasing), TB_U("suppressed", skipped));
        c->abort = true;
        broker__conn_close(c, 0, "max_connections");
        return;
    }
    if (!srv->paused)
        broker__conn_resume(c);
}

bool broker__conn_hold(broker_conn_t *c, int64_t delta)
{
    broker_t *srv = c->srv;
    if (delta > 0 && srv->partial_bytes + (uint64_t)delta > srv->cfg->mqtt.max_partial_bytes)
        return false;
    srv->partial_bytes = (uint64_t)((int64_t)srv->partial_bytes + delta);
    c->mem = (size_t)((int64_t)c->mem + delta);
    return true;
}

/* Grows c's partial-packet buffer to cap; false (nothing changed) past mqtt.max_partial_bytes. */
static bool in_grow(broker_conn_t *c, size_t cap)
{
    if (!broker__conn_hold(c, (int64_t)cap - (int64_t)c->in_cap)) {
        c->mem_refused = true;
        return false;
    }
    c->in = tb_realloc(c->in, cap);
    c->in_cap = cap;
    return true;
}

static void in_free(broker_conn_t *c)
{
    broker__conn_hold(c, -(int64_t)c->in_cap);
    free(c->in);
    c->in = NULL;
    c->in_cap = 0;
}

/* The whole length of the packet whose first n bytes are at p (fixed header
 * included), or 0 while its length is not yet there (or is malformed: the
 * decoder says so when it sees it). */
static size_t packet_len(const uint8_t *p, size_t n)
{
    size_t rem = 0;
    for (size_t i = 1; i < n && i <= 4; i++) {
        rem |= (size_t)(p[i] & 0x7f) << (7 * (i - 1));
        if (!(p[i] & 0x80))
            return 1 + i + rem;
    }
    return 0;
}

void broker__conn_rx_buf(broker_conn_t *c, uv_buf_t *buf)
{
    broker_t *srv = c->srv;
    if (c->in_len == 0 && !srv->readbuf_busy) {
        srv->readbuf_busy = true;
        *buf = uv_buf_init((char *)srv->readbuf, sizeof srv->readbuf);
        return;
    }
    /* An incomplete packet is waiting: read straight behind it, into room
     * for the whole packet once its length is known (a doubling buffer held
     * up to twice that: a 256 KiB packet kept 256 to 512 KiB, depending on
     * how the first bytes came), else doubling. */
    size_t whole = packet_len(c->in, c->in_len);
    if (whole > c->in_cap && whole <= broker__max_packet(srv->cfg)) {
        if (!in_grow(c, whole)) {
            *buf = uv_buf_init(NULL, 0); /* the transport reports UV_ENOBUFS: closed in broker__conn_rx */
            return;
        }
    } else if (c->in_cap - c->in_len < 4096 && !in_grow(c, c->in_cap ? (size_t)c->in_cap * 2 : 16384)) {
        *buf = uv_buf_init(NULL, 0); /* the transport reports UV_ENOBUFS: closed in broker__conn_rx */
        return;
    }
    *buf = uv_buf_init((char *)c->in + c->in_len, c->in_cap - c->in_len);
}

static void memory_refused(broker_conn_t *c)
{
    broker__conn_give_up(c, METRICS_CLOSE_MEMORY_LIMIT, MQTT_RC_QUOTA_EXCEEDED,
                         "its incomplete packet would pass mqtt.max_partial_bytes (bytes all connections hold in "
                         "partial packets and topic aliases)");
}


/* SUBACK / UNSUBACK with one reason code per filter [MQTT-3.8.4-6], however
 * many the packet held (its size is bounded by the packet limit). */
static void send_codes(broker_conn_t *c, mqtt_type_t type, uint16_t packet_id, uint8_t code, uint32_t n)
{
    uint8_t *codes = tb_malloc(n ? n : 1);
    memset(codes, code, n);
    size_t cap = (size_t)n + 16;
    uint8_t *out = tb_malloc(cap);
    int len = mqtt_encode_suback(out, cap, c->version, type, packet_id, codes, n, NULL);
    if (len > 0)
        broker__conn_send(c, out, (size_t)len);
    free(codes);
    free(out);
}

static void on_subscribe(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    /* An ingest gateway has no local subscribers: refuse every filter, so no
     * client waits for a SUBACK that never comes. */
    uint8_t code = c->version == MQTT_V5 ? MQTT_RC_NOT_AUTHORIZED : 0x80;
    send_codes(c, MQTT_SUBACK, pkt->u.sub.packet_id, code, pkt->u.sub.filters.count);
}

static void on_unsubscribe(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    uint32_t n = c->version == MQTT_V5 ? pkt->u.sub.filters.count : 0; /* 3.1.1's UNSUBACK has no codes */
    send_codes(c, MQTT_UNSUBACK, pkt->u.sub.packet_id, MQTT_RC_NO_SUBSCRIPTION_EXISTED, n);
}

/* Handles one decoded packet. Returns false once the connection is closing. */
static bool dispatch(broker_conn_t *c, const mqtt_packet_t *pkt, const uint8_t *raw, size_t rawlen)
{
    if (!c->connected) {
        /* the codec only lets CONNECT through before the version is known */
        broker__on_connect(c, pkt, raw, rawlen);
        return !c->closing && !c->auth; /* while its password is checked, what follows waits */
    }
    switch (pkt->type) {
    case MQTT_PUBLISH:
        broker__on_publish(c, pkt);
        break;
    case MQTT_PUBREL:
        broker__on_pubrel(c, pkt);
        break;
    case MQTT_PUBACK:
    case MQTT_PUBREC:
    case MQTT_PUBCOMP:
        /* We never send PUBLISH, so an ack for one is a protocol error. */
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "ack for a PUBLISH the server never sent");
        break;
    case MQTT_SUBSCRIBE:
        on_subscribe(c, pkt);
        break;
    case MQTT_UNSUBSCRIBE:
        on_unsubscribe(c, pkt);
        break;
    case MQTT_PINGREQ: {
        uint8_t out[2];
        int n = mqtt_encode_pingresp(out, sizeof out);
        broker__conn_send(c, out, (size_t)n);
        break;
    }
    case MQTT_DISCONNECT:
        c->got_disconnect = true;
        /* MQTT 5: 0x04 "Disconnect with Will Message" keeps the will */
        c->will_suppressed = !(c->version == MQTT_V5 && pkt->u.disconnect.reason == MQTT_RC_DISCONNECT_WITH_WILL);
        if (c->version == MQTT_V5 && c->session && MQTT_HAS(&pkt->props, MQTT_PROP_SESSION_EXPIRY)) {
            if (c->session->expiry_s == 0 && pkt->props.session_expiry != 0) {
                broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "session expiry set on DISCONNECT after 0 at CONNECT");
                break;
            }
            c->session->expiry_s = TB_MIN(pkt->props.session_expiry, c->srv->cfg->mqtt.max_session_expiry_s);
        }
        broker__conn_close(c, 0, "client disconnected");
        break;
    case MQTT_CONNECT:
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "second CONNECT");
        break;
    case MQTT_AUTH:
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "AUTH without an authentication method");
        break;
    default:
        broker__conn_close(c, MQTT_RC_PROTOCOL_ERROR, "packet a client may not send");
        break;
    }
    return !c->closing;
}

/* Decodes and dispatches every whole packet in buf[0..len); returns the bytes used. */
static size_t process(broker_conn_t *c, const uint8_t *buf, size_t len)
{
    size_t used = 0;
    while (used < len && !c->closing && !c->auth && !c->blocked) {
        mqtt_packet_t pkt;
        mqtt_diag_t diag;
        int rc = mqtt_decode(buf + used, len - used, c->version, broker__max_packet(c->srv->cfg), &pkt, &diag);
        if (rc == 0)
            break;
        if (rc < 0) {
            c->srv->conn_closed[METRICS_CLOSE_MALFORMED]++;
            broker__conn_close(c, diag.reason, diag.why);
            break;
        }
        used += (size_t)rc;
        if (!dispatch(c, &pkt, buf + used - rc, (size_t)rc))
            break;
    }
    return used;
}

/* Dispatches the whole packets in c's own input buffer and keeps the rest. */
static void consume_in(broker_conn_t *c)
{
    size_t used = process(c, c->in, c->in_len);
    if (c->closing) {
        in_free(c); /* nothing more is read: give the partial packet back now */
        c->in_len = 0;
        return;
    }
    c->in_len -= used;
    if (c->in_len > 0) {
        memmove(c->in, c->in + used, c->in_len);
        if (used > 0)
            c->partial_since_ms = uv_now(c->srv->loop); /* the next packet has begun */
    } else if (c->in_cap > 65536) {
        in_free(c); /* a big packet passed: give its buffer back */
    }
}

void broker__conn_rx(broker_conn_t *c, const uv_buf_t *buf, ssize_t nread)
{
    broker_t *srv = c->srv;
    bool shared = buf->base == (char *)srv->readbuf;
    if (shared)
        srv->readbuf_busy = false;
    if (nread < 0) {
        if (c->mem_refused)
            memory_refused(c);
        else
            broker__conn_close(c, 0, nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
        return;
    }
    if (nread == 0 || c->closing)
        return;
    uint64_t now = uv_now(srv->loop);
    if (c->connected)
        c->last_rx_ms = now; /* before CONNECT it stays the accept time */
    if (shared) {
        size_t used = process(c, (const uint8_t *)buf->base, (size_t)nread);
        size_t left = (size_t)nread - used;
        if (left > 0 && !c->closing) {
            size_t whole = packet_len((const uint8_t *)buf->base + used, left);
            size_t want = whole > left && whole <= broker__max_packet(srv->cfg) ? whole : TB_MAX(left, (size_t)16384);
            if (c->in_cap < left && !in_grow(c, want)) {
                memory_refused(c);
                return;
            }
            memcpy(c->in, buf->base + used, left);
            c->in_len = left;
            c->partial_since_ms = now; /* a packet has begun: mqtt.packet_timeout_ms */
        }
    } else {
        c->in_len += (size_t)nread;
        consume_in(c);
    }
}

void broker__conn_input_resume(broker_conn_t *c)
{
    if (c->in_len > 0)
        consume_in(c);
    if (!c->closing && !c->srv->paused)
        broker__conn_resume(c);
}

/* Its unread replies are at half of mqtt.max_unread_bytes: read no more from
 * it until they drain to a quarter, so a client that does not read cannot
 * make us hold more (TCP's window then stops its sending). */
static bool tx_full(const broker_conn_t *c)
{
    return c->tx_held + c->out_len >= c->srv->cfg->mqtt.max_unread_bytes / 2;
}

void broker__conn_tx_progress(broker_conn_t *c)
{
    if (c->tx_paused && c->tx_held < c->srv->cfg->mqtt.max_unread_bytes / 4) {
        c->tx_paused = false;
        if (!c->srv->paused)
            broker__conn_resume(c);
    }
}

void broker__conn_resume(broker_conn_t *c)
{
    if (c->closing || c->reading || c->tx_paused || c->auth || c->blocked ||
        c->unanswered >= c->srv->cfg->mqtt.receive_maximum)
        return;
    if (c->tp->read_start(c) == 0)
        c->reading = true;
}

void broker__conn_pause(broker_conn_t *c)
{
    if (!c->reading)
        return;
    c->tp->read_stop(c);
    c->reading = false;
}

/* ---- writing -------------------------------------------------------------- */

void broker__conn_tx_failed(broker_conn_t *c, int err)
{
    if (c->closing)
        return;
    c->srv->conn_closed[METRICS_CLOSE_WRITE_ERROR]++;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("connection closed: cannot write to it; its unacknowledged messages will be resent by the client",
                TB_S("client", c->client_id ? c->client_id : ""), TB_S("peer", broker__conn_peer(c)),
                TB_S("transport", c->tp->name), TB_S("error", tb_strerror(err)), TB_U("suppressed", skipped));
    broker__conn_close(c, 0, "write failed");
}

void broker__conn_send(broker_conn_t *c, const uint8_t *p, size_t n)
{
    if (c->closing)
        return;
    if (!c->out && c->srv->nout_pool > 0) { /* a buffer another connection gave back */
        broker_t *srv = c->srv;
        srv->nout_pool--;
        c->out = srv->out_pool[srv->nout_pool].p;
        c->out_cap = srv->out_pool[srv->nout_pool].cap;
    }
    if (c->out_len + n > c->out_cap) {
        size_t cap = TB_MAX((size_t)c->out_cap * 2, c->out_len + n);
        cap = TB_MAX(cap, (size_t)256);
        c->out = tb_realloc(c->out, cap);
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    if (!c->tx_paused && tx_full(c)) {
        /* this turn's replies plus the unsent ones reach half the limit: read
         * no more from it (what the current read holds is still answered) */
        c->tx_paused = true;
        broker__conn_pause(c);
    }
    if (!c->dirty) {
        /* written once at the end of this loop turn (server.c's check
         * handle): a batch completion acking 100 messages of one client
         * becomes one write, not 100 */
        c->dirty = true;
        c->refs++;
        c->dirty_next = c->srv->dirty;
        c->srv->dirty = c;
    }
}

void broker__conn_flush_dirty(broker_t *srv)
{
    while (srv->dirty) {
        broker_conn_t *c = srv->dirty;
        srv->dirty = c->dirty_next;
        c->dirty = false;
        broker__conn_flush(c);
        broker__conn_unref(c);
    }
}

void broker__conn_give_up(broker_conn_t *c, metrics_close_t why, uint8_t reason5, const char *what)
{
    if (c->closing)
        return;
    c->srv->conn_closed[why]++;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("connection closed: a limit was reached", TB_S("client", c->client_id ? c->client_id : ""),
                TB_S("peer", broker__conn_peer(c)), TB_S("why", what), TB_S("reason", metrics_mqtt_close_reasons[why]),
                TB_U("unread_bytes", c->tx_queued + c->out_len), TB_U("suppressed", skipped));
    /* a client that does not read would not read a goodbye either: its socket goes now */
    c->abort = why == METRICS_CLOSE_UNREAD_LIMIT || why == METRICS_CLOSE_WRITE_TIMEOUT;
    broker__conn_close(c, c->abort ? 0 : reason5, what);
}

/* Gives c's reply buffer back to the server's pool (a big one, or past the pool's size, is freed). */
static void out_release(broker_conn_t *c)
{
    broker_t *srv = c->srv;
    if (!c->out)
        return;
    if (c->out_cap <= BROKER_OUT_POOL_CAP && srv->nout_pool < BROKER_OUT_POOL) {
        srv->out_pool[srv->nout_pool].p = c->out;
        srv->out_pool[srv->nout_pool].cap = c->out_cap;
        srv->nout_pool++;
    } else {
        free(c->out);
    }
    c->out = NULL;
    c->out_cap = 0;
}

void broker__conn_flush(broker_conn_t *c)
{
    if (c->out_len == 0 || c->tp_closed)
        return;
    if (c->tx_held + c->out_len > c->srv->cfg->mqtt.max_unread_bytes) {
        if (!c->closing) /* (its log line counts these replies: they are dropped after it) */
            broker__conn_give_up(c, METRICS_CLOSE_UNREAD_LIMIT, 0, "it leaves its replies unread (mqtt.max_unread_bytes)");
        c->out_len = 0;
        return;
    }
    int rc = c->tp->write(c, c->out, c->out_len); /* takes or copies them all */
    c->out_len = 0;
    out_release(c);
    if (rc < 0) {
        broker__conn_tx_failed(c, rc);
    } else if (!c->closing) {
        if (tx_full(c)) {
            c->tx_paused = true; /* broker__conn_tx_progress resumes it */
            broker__conn_pause(c);
        } else {
            broker__conn_tx_progress(c); /* the kernel took it all: a pause of this turn ends */
        }
    }
}

/* ---- acks ------------------------------------------------------------------ */

broker_pending_t *broker__conn_pending_new(broker_conn_t *c, uint16_t packet_id, uint8_t qos)
{
    broker_pending_t *p = tb_calloc(1, sizeof *p);
    p->conn = c;
    /* flow control: stop reading a client with a full window of unanswered messages */
    if (++c->unanswered >= c->srv->cfg->mqtt.receive_maximum)
        broker__conn_pause(c);
    p->packet_id = packet_id;
    p->qos = qos;
    c->refs++;
    if (c->pend_tail) c->pend_tail->next = p;
    else c->pend_head = p;
    c->pend_tail = p;
    return p;
}

static void send_ack(broker_conn_t *c, broker_pending_t *p)
{
    uint8_t out[64];
    mqtt_type_t type = p->pubcomp ? MQTT_PUBCOMP : p->qos == 1 ? MQTT_PUBACK : MQTT_PUBREC;
    uint8_t reason = c->version == MQTT_V5 ? p->reason : 0;
    int n = mqtt_encode_ack(out, sizeof out, c->version, type, p->packet_id, reason, NULL);
    if (n > 0) {
        broker__conn_send(c, out, (size_t)n);
        broker__pace_acked(&c->pace); /* its next PUBLISH may be one this ack let go */
    }
}

void broker__conn_drain_acks(broker_conn_t *c)
{
    c->refs++; /* freeing the last pending entry must not free c under us */
    while (c->pend_head && c->pend_head->waits == 0) {
        broker_pending_t *p = c->pend_head;
        c->pend_head = p->next;
        if (!c->pend_head)
            c->pend_tail = NULL;
        broker_session_t *s = p->session;
        if (s) {
            if (broker__session_storing(s, p->packet_id) == p)
                broker__session_set_storing(s, p->packet_id, NULL);
            if (p->qos2_record && p->reason < 0x80)
                broker__session_add_qos2_at(s, p->packet_id, p->stored_rt);
            else if (p->stored_journaled)
                /* refused after its STORED was journaled: a restart must not take a resend for a duplicate */
                broker__journal_qos2(c->srv, s, p->packet_id, false, NULL, p->stored_rt);
            broker__session_unref(s);
        }
        if (p->follower) {
            /* the resend gets the first copy's answer, in its own connection's version */
            if (p->refused)
                broker__refuse(p->follower->conn, p->follower, (broker_refuse_t)(p->refused - 1));
            else
                p->follower->reason = p->reason;
            p->follower->waits--;
            broker__conn_drain_acks(p->follower->conn);
        }
        if (!c->closing) {
            if (p->close) {
                free(p);
                c->unanswered--;
                broker__conn_unref(c);
                broker__conn_close(c, 0, "message refused and MQTT 3.1.1 cannot say so");
                continue;
            }
            send_ack(c, p); /* written at the end of the loop turn (broker__conn_flush_dirty) */
            /* QoS 1 ends at PUBACK; QoS 2 at PUBCOMP, or at a refusing PUBREC */
            if ((p->pubcomp || p->qos == 1 || p->reason >= 0x80) && c->inflight > 0)
                c->inflight--;
        }
        free(p);
        c->unanswered--;
        broker__conn_unref(c);
    }
    if (!c->reading && !c->closing && !c->srv->paused && c->unanswered < c->srv->cfg->mqtt.receive_maximum)
        broker__conn_resume(c);
    broker__conn_unref(c);
}

/* ---- closing ----------------------------------------------------------------- */

void broker__conn_released(broker_conn_t *c)
{
    broker_t *srv = c->srv;
    bool listed = c->listed;
    if (listed)
        srv->nreleasing--; /* its descriptor is free: no longer counted against max_connections */
    broker__conn_unref(c);
    if (listed && srv->draining)
        broker__check_drained(srv);
}

void broker__conn_unref(broker_conn_t *c)
{
    if (--c->refs > 0)
        return;
    in_free(c);
    free(c->out);
    free(c);
}

void broker__conn_close(broker_conn_t *c, uint8_t reason, const char *why)
{
    if (c->closing)
        return;
    broker_t *srv = c->srv;
    if (reason >= 0x80 && c->connected && c->version == MQTT_V5) {
        uint8_t out[16];
        int n = mqtt_encode_disconnect(out, sizeof out, MQTT_V5, reason, NULL);
        if (n > 0)
            broker__conn_send(c, out, (size_t)n);
    }
    /* closing before the flush: a write that fails in it must not close c a second time
     * (it did: the connection left the list twice, and a drain waited for ever) */
    c->closing = true;
    broker__conn_flush(c);
    broker__conn_pause(c);
    if (c->blocked)
        broker__ingest_forget(c);
    if (reason >= 0x80) {
        /* one per connection is an attacker's amplifier: a burst per second, then a count */
        static tb_ratelimit_t rl = TB_RATELIMIT_BURST_INIT(1000, BROKER_CONN_LOG_BURST);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_info("connection closed", TB_S("client", c->client_id ? c->client_id : ""), TB_S("peer", broker__conn_peer(c)),
                    TB_S("reason", why), TB_S("code", mqtt_reason_name(reason)), TB_U("suppressed", skipped));
    } else if (!c->got_disconnect) {
        tb_debug("connection closed", TB_S("client", c->client_id ? c->client_id : ""), TB_S("peer", broker__conn_peer(c)),
                 TB_S("reason", why), TB_S("code", "none"));
    }
    list_remove(srv, c);
    srv->nreleasing++;
    if (c->connected) {
        srv->nconnected--;
        if (c->listener)
            c->listener->nconnected--;
        if (c->will && !(c->got_disconnect && c->will_suppressed))
            broker__publish_will(srv, c);
        broker__session_detach(srv, c);
        if (c->client_id_shared)
            c->client_id = NULL; /* the session's: it may have gone with the detach */
    }
    if (c->aliases) {
        for (uint32_t i = 0; i <= srv->cfg->mqtt.topic_alias_maximum; i++)
            free(c->aliases[i]);
        free(c->aliases);
        c->aliases = NULL;
    }
    broker__conn_hold(c, -(int64_t)(c->mem - c->in_cap)); /* the alias table and its topics (in: in_free) */
    if (!c->client_id_shared)
        free(c->client_id);
    c->client_id = NULL;
    free(c->username);
    c->username = NULL;
    broker__auth_cancel(c); /* a throttle delay ends; a check on the pool finishes unused */
    broker_conn_will_t *w = c->will;
    if (w) {
        free(w->topic);
        free(w->payload);
        for (size_t i = 0; i < w->nattrs; i++) {
            free((void *)w->attrs[i].key);
            free((void *)w->attrs[i].val);
        }
        free(w->attrs);
        srv->will_bytes -= w->bytes;
        free(w);
        c->will = NULL;
    }
    c->tp_closed = true;
    c->tp->close(c); /* the socket's reference goes in broker__conn_released */
    /* pending acks stay until their batches complete; they are then freed unsent */
    broker__conn_drain_acks(c);
}

void broker__conn_sweep(broker_t *srv, uint64_t now)
{
    uint32_t timeout = srv->cfg->mqtt.connect_timeout_ms;
    for (broker_conn_t *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (!c->connected && now - c->last_rx_ms >= timeout) {
            srv->conn_closed[METRICS_CLOSE_CONNECT_TIMEOUT]++;
            broker__conn_close(c, 0, "no CONNECT within mqtt.connect_timeout_ms");
            continue;
        }
        if (c->keep_alive && now - c->last_rx_ms >= (uint64_t)c->keep_alive * 1500u) {
            srv->conn_closed[METRICS_CLOSE_KEEPALIVE_TIMEOUT]++;
            broker__conn_close(c, MQTT_RC_KEEP_ALIVE_TIMEOUT, "keep alive expired (1.5 x keep_alive without a packet)");
            continue;
        }
        if (c->in_len > 0 && now - c->partial_since_ms >= srv->cfg->mqtt.packet_timeout_ms) {
            broker__conn_give_up(c, METRICS_CLOSE_PACKET_TIMEOUT, MQTT_RC_KEEP_ALIVE_TIMEOUT,
                                 "a packet it began did not complete within mqtt.packet_timeout_ms");
            continue;
        }
        if (c->in && c->in_len == 0)
            in_free(c); /* an idle connection holds no input buffer either */
        if (c->tx_queued > 0 && now - c->tx_progress_ms >= srv->cfg->mqtt.write_timeout_ms)
            broker__conn_give_up(c, METRICS_CLOSE_WRITE_TIMEOUT, 0,
                                 "its replies made no progress for mqtt.write_timeout_ms (it does not read)");
    }
}
