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

#include <stdlib.h>
#include <string.h>

#define OUT_LIMIT (4u << 20) /* replies a client may leave unread before we give up on it */


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
    c->id = ++srv->next_conn_id;
    c->refs = 1;
    return c;
}

void broker__conn_start(broker_conn_t *c, const char *peer)
{
    broker_t *srv = c->srv;
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    c->accepted_ms = c->last_rx_ms = uv_now(srv->loop);
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    srv->conn_accepted++;
    if (!srv->paused)
        broker__conn_resume(c);
}

void broker__conn_rx_buf(broker_conn_t *c, uv_buf_t *buf)
{
    broker_t *srv = c->srv;
    if (c->in_len == 0 && !srv->readbuf_busy) {
        srv->readbuf_busy = true;
        *buf = uv_buf_init((char *)srv->readbuf, sizeof srv->readbuf);
        return;
    }
    /* An incomplete packet is waiting: read straight behind it. */
    if (c->in_cap - c->in_len < 4096) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 16384;
        c->in = tb_realloc(c->in, cap);
        c->in_cap = cap;
    }
    *buf = uv_buf_init((char *)c->in + c->in_len, c->in_cap - c->in_len);
}


static void on_subscribe(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    /* An ingest gateway has no local subscribers: refuse every filter, so no
     * client waits for a SUBACK that never comes. */
    uint8_t codes[256];
    uint32_t n = TB_MIN(pkt->u.sub.filters.count, (uint32_t)sizeof codes);
    uint8_t code = c->version == MQTT_V5 ? MQTT_RC_NOT_AUTHORIZED : 0x80;
    memset(codes, code, n);
    uint8_t out[300];
    int len = mqtt_encode_suback(out, sizeof out, c->version, MQTT_SUBACK, pkt->u.sub.packet_id, codes, n, NULL);
    if (len > 0)
        broker__conn_send(c, out, (size_t)len);
}

static void on_unsubscribe(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    uint8_t codes[256];
    uint32_t n = c->version == MQTT_V5 ? TB_MIN(pkt->u.sub.filters.count, (uint32_t)sizeof codes) : 0;
    memset(codes, MQTT_RC_NO_SUBSCRIPTION_EXISTED, n);
    uint8_t out[300];
    int len = mqtt_encode_suback(out, sizeof out, c->version, MQTT_UNSUBACK, pkt->u.sub.packet_id, codes, n, NULL);
    if (len > 0)
        broker__conn_send(c, out, (size_t)len);
}

/* Handles one decoded packet. Returns false once the connection is closing. */
static bool dispatch(broker_conn_t *c, const mqtt_packet_t *pkt)
{
    if (!c->connected) {
        /* the codec only lets CONNECT through before the version is known */
        broker__on_connect(c, pkt);
        return !c->closing;
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
    while (used < len && !c->closing) {
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
        if (!dispatch(c, &pkt))
            break;
    }
    return used;
}

void broker__conn_rx(broker_conn_t *c, const uv_buf_t *buf, ssize_t nread)
{
    broker_t *srv = c->srv;
    bool shared = buf->base == (char *)srv->readbuf;
    if (shared)
        srv->readbuf_busy = false;
    if (nread < 0) {
        broker__conn_close(c, 0, nread == UV_EOF ? "connection closed by peer" : uv_strerror((int)nread));
        return;
    }
    if (nread == 0 || c->closing)
        return;
    c->last_rx_ms = uv_now(srv->loop);
    if (shared) {
        size_t used = process(c, (const uint8_t *)buf->base, (size_t)nread);
        size_t left = (size_t)nread - used;
        if (left > 0 && !c->closing) {
            if (c->in_cap < left) {
                c->in = tb_realloc(c->in, TB_MAX(left, (size_t)16384));
                c->in_cap = TB_MAX(left, (size_t)16384);
            }
            memcpy(c->in, buf->base + used, left);
            c->in_len = left;
        }
    } else {
        c->in_len += (size_t)nread;
        size_t used = process(c, c->in, c->in_len);
        if (!c->closing) {
            c->in_len -= used;
            if (c->in_len > 0)
                memmove(c->in, c->in + used, c->in_len);
            else if (c->in_cap > 65536) {
                free(c->in); /* a big packet passed: give its buffer back */
                c->in = NULL;
                c->in_cap = 0;
            }
        }
    }
}

void broker__conn_resume(broker_conn_t *c)
{
    if (c->closing || c->reading || c->unanswered >= c->srv->cfg->mqtt.receive_maximum)
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
                TB_S("client", c->client_id ? c->client_id : ""), TB_S("peer", c->peer),
                TB_S("transport", c->tp->name), TB_S("error", tb_strerror(err)), TB_U("suppressed", skipped));
    broker__conn_close(c, 0, "write failed");
}

void broker__conn_send(broker_conn_t *c, const uint8_t *p, size_t n)
{
    if (c->closing)
        return;
    if (c->out_len + n > c->out_cap) {
        size_t cap = TB_MAX(c->out_cap * 2, c->out_len + n);
        cap = TB_MAX(cap, (size_t)256);
        c->out = tb_realloc(c->out, cap);
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
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

void broker__conn_flush(broker_conn_t *c)
{
    if (c->out_len == 0 || c->tp_closed)
        return;
    if (c->tp->queued(c) + c->out_len > OUT_LIMIT) {
        c->out_len = 0;
        if (!c->closing)
            broker__conn_close(c, 0, "client does not read its acks");
        return;
    }
    int rc = c->tp->write(c, c->out, c->out_len);
    c->out_len = 0;
    if (c->out_cap > 65536) {
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    if (rc < 0)
        broker__conn_tx_failed(c, rc);
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
                broker__session_add_qos2(s, p->packet_id);
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
    broker__conn_unref(c);
}

void broker__conn_unref(broker_conn_t *c)
{
    if (--c->refs > 0)
        return;
    free(c->in);
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
    broker__conn_flush(c);
    c->closing = true;
    broker__conn_pause(c);
    if (reason >= 0x80 || !c->got_disconnect) {
        tb_log(reason >= 0x80 ? TB_LOG_INFO : TB_LOG_DEBUG, "connection closed",
               TB_S("client", c->client_id ? c->client_id : ""), TB_S("peer", c->peer),
               TB_S("reason", why), TB_S("code", reason >= 0x80 ? mqtt_reason_name(reason) : "none"));
    }
    list_remove(srv, c);
    if (c->connected) {
        srv->nconnected--;
        if (c->has_will && !(c->got_disconnect && c->will_suppressed))
            broker__publish_will(srv, c);
        broker__session_detach(srv, c);
    }
    if (c->aliases) {
        for (uint32_t i = 0; i <= srv->cfg->mqtt.topic_alias_maximum; i++)
            free(c->aliases[i]);
        free(c->aliases);
        c->aliases = NULL;
    }
    free(c->client_id);
    c->client_id = NULL;
    free(c->will_topic);
    free(c->will_payload);
    for (size_t i = 0; i < c->will_nattrs; i++) {
        free((void *)c->will_attrs[i].key);
        free((void *)c->will_attrs[i].val);
    }
    free(c->will_attrs);
    c->will_topic = NULL;
    c->will_payload = NULL;
    c->will_attrs = NULL;
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
        if (!c->connected) {
            if (now - c->accepted_ms >= timeout) {
                srv->conn_closed[METRICS_CLOSE_CONNECT_TIMEOUT]++;
                broker__conn_close(c, 0, "no CONNECT within mqtt.connect_timeout_ms");
            }
        } else if (c->keep_alive && now - c->last_rx_ms >= (uint64_t)c->keep_alive * 1500u) {
            srv->conn_closed[METRICS_CLOSE_KEEPALIVE_TIMEOUT]++;
            broker__conn_close(c, MQTT_RC_KEEP_ALIVE_TIMEOUT, "keep alive expired (1.5 x keep_alive without a packet)");
        }
    }
}
