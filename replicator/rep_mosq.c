/*
 * rep_mosq.c: one MQTT output connection on libmosquitto, on a thread of
 * our own (docs/design/OUTPUTS.md 2.5, 4.1, 4.4; docs/REPLICATION.md, "The
 * MQTT output's connection").
 *
 * The thread, as a state machine:
 *
 *   CONNECTING --CONNACK 0--> UP --(error, silent remote, ack deadline)--+
 *       |  \--CONNACK refused--> REFUSED --backoff--> CONNECTING         |
 *       +--(error, CONNACK deadline)--> BACKOFF --backoff--> CONNECTING <-+
 *
 * Every attempt gets a fresh `struct mosquitto` (mosquitto_new), destroyed
 * when the attempt or session ends: libmosquitto would otherwise resend its
 * own in-flight list after a reconnect in parallel with ours, and we resend
 * everything unacknowledged ourselves (session_lost -> the owner rewinds to
 * its checkpoint + 1), in order. The handle is in mosquitto_threaded_set
 * mode and touched by this thread only; libmosquitto then never writes
 * inline: every write happens in our mosquitto_loop_write.
 *
 * The loop: poll({eventfd, the handle's socket (POLLOUT only when
 * mosquitto_want_write)}, the earliest deadline of the heap) ->
 * mosquitto_loop_read, and again while TLS holds decrypted bytes
 * (SSL_pending: the socket no longer shows them) -> due timers -> pump
 * (next() while the window has room) -> mosquitto_loop_write. Before the
 * CONNACK, mosquitto_loop(m, 0, ..) instead of read/write (see io()). Timers: the
 * CONNACK deadline, a one-second tick (mosquitto_loop_misc: PINGREQ, and
 * the close of a connection whose PINGRESP did not come; then the ack
 * deadline check), the backoff's end.
 *
 * In flight: one slot per message handed out, max_inflight slots; a slot
 * is linked into its lane's FIFO (so acks are reported over a contiguous
 * acknowledged prefix per lane) and found from its packet id through a
 * direct table of 65,536 entries (libmosquitto numbers mids 1..65535; a
 * direct index costs 256 KiB per output and no hashing). QoS 0 messages
 * have no mid: they are confirmed by an UNSUBSCRIBE of a filter the client
 * never subscribed (tributary/confirm/<client_id>), whose UNSUBACK the
 * remote sends after it read everything before it on the connection
 * (OUTPUTS.md 4.4); its reply acks every QoS 0 message sent before it.
 *
 * Callbacks from libmosquitto run inside its loop calls; they never destroy
 * the handle, they set `fail` and the loop ends the session after the call.
 */
#include "replicator/rep_int.h"
#include "replicator/rep_mosq_int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MID_MAX 65536
#define TICK_MS 1000

typedef struct slot {
    uint64_t token;
    uint64_t sent_ms;
    uint64_t seq;      /* send order within the session */
    uint32_t lane;
    int32_t next;      /* in its lane's FIFO, or the free list; -1: none */
    int mid;           /* 0: QoS 0 (no packet id) */
    bool acked;
} slot_t;

typedef struct lane {
    int32_t head, tail; /* FIFO of slots, -1 when empty */
} lane_t;

struct rep_mosq {
    rep_mosq_opts_t o;          /* strings below are owned copies */
    char *password;             /* cleared on free */
    char *confirm_topic;        /* QoS 0 confirmation filter */
    const rep_mosq_owner_ops_t *ops;
    const rep_mosq_session_ops_t *sops; /* never NULL (a static of NULLs) */
    void *owner;
    uint32_t nlanes;
    lane_t *lanes;
    slot_t *slots;
    int32_t free_head;
    int32_t *mid_slot;          /* mid -> slot, -1 */
    uint32_t inflight, window;
    uint64_t seq;
    bool handed;                /* messages handed out since the last session_lost */
    bool acked_this_session;
    int confirm_mid;            /* QoS 0: the UNSUBSCRIBE in flight (0: none) */
    uint64_t confirm_seq;       /* ... confirms the messages with seq < this */
    uint64_t up_since_ms;
    char **subs;                /* opts.subscribe, owned */
    int subs_mid;               /* their SUBSCRIBE (0: none in flight) */
    bool subs_pending;          /* next() waits for their SUBACK */
    bool bye;                   /* end with DISCONNECT (no will), no failure counted */
    atomic_bool fw_req;         /* rep__mosq_farewell asked; fw_* under mu */
    char *fw_topic;
    void *fw_payload;
    size_t fw_len;
    uint32_t fw_wait_ms;
    bool fw_final, fw_on;       /* fw_on: taken by the thread, pump closed */
    int fw_mid;
    uint64_t fw_seq;            /* QoS 0 messages with seq < this precede it */

    struct mosquitto *m;
    bool tcp_up;                /* the handle's TCP connect completed (POLLOUT seen) */
    bool read_turn;             /* this turn read from the socket (quickack() if it sends nothing) */
    bool fail;                  /* set in callbacks: end the session after the call */
    char fail_why[200];
    bool refused;
    char tls_err[160];          /* OpenSSL's reason, from libmosquitto's log */

    rep__heap_t timers;
    rep__timer_t t_connect, t_tick, t_retry, t_fw;
    rep__backoff_t backoff;
    uint64_t rng;

    int efd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_bool kicked;
    uint64_t idle_due;          /* the owner's idle() wish (tb_mono_ms); 0: none */

    pthread_mutex_t mu;         /* st */
    rep_mosq_stats_t st;
};

static const char *const state_names[] = {
    [REP_MOSQ_IDLE] = "idle",       [REP_MOSQ_CONNECTING] = "connecting", [REP_MOSQ_UP] = "up",
    [REP_MOSQ_BACKOFF] = "backoff", [REP_MOSQ_REFUSED] = "refused",       [REP_MOSQ_STOPPED] = "stopped",
};

const char *rep__mosq_state_name(rep_mosq_state_t s)
{
    return (unsigned)s < TB_ARRAY_LEN(state_names) ? state_names[s] : "?";
}

void rep__mosq_opts_default(rep_mosq_opts_t *o)
{
    *o = (rep_mosq_opts_t){
        .protocol = 5, .clean_session = false, .keepalive_s = 30, .qos = 1, .max_inflight = 100,
        .tls = false, .tls_verify = true, .connect_timeout_ms = 10000, .ack_timeout_ms = 30000,
        .retry_initial_ms = 100, .retry_max_ms = 30000,
    };
}

/* ---- stats ------------------------------------------------------------------- */

static void set_state(rep_mosq_t *c, rep_mosq_state_t s)
{
    pthread_mutex_lock(&c->mu);
    c->st.state = s;
    pthread_mutex_unlock(&c->mu);
}

#define BUMP(c, field, n)                 \
    do {                                  \
        pthread_mutex_lock(&(c)->mu);     \
        (c)->st.field += (n);             \
        pthread_mutex_unlock(&(c)->mu);   \
    } while (0)

void rep__mosq_stats(rep_mosq_t *c, rep_mosq_stats_t *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

/* ---- in-flight slots ------------------------------------------------------------ */

static void slots_reset(rep_mosq_t *c)
{
    for (uint32_t i = 0; i < c->o.max_inflight; i++)
        c->slots[i] = (slot_t){ .next = i + 1 < c->o.max_inflight ? (int32_t)i + 1 : -1 };
    c->free_head = 0;
    for (uint32_t i = 0; i < c->nlanes; i++)
        c->lanes[i].head = c->lanes[i].tail = -1;
    for (size_t i = 0; i < MID_MAX; i++)
        c->mid_slot[i] = -1;
    c->inflight = 0;
    c->confirm_mid = 0;
}

/* Reports the contiguous acknowledged prefix of a lane and frees it. */
static void lane_flush(rep_mosq_t *c, uint32_t ln)
{
    lane_t *l = &c->lanes[ln];
    uint64_t last = 0;
    uint32_t n = 0;
    while (l->head >= 0 && c->slots[l->head].acked) {
        int32_t i = l->head;
        slot_t *s = &c->slots[i];
        last = s->token;
        l->head = s->next;
        if (l->head < 0)
            l->tail = -1;
        s->next = c->free_head;
        c->free_head = i;
        c->inflight--;
        n++;
    }
    if (n == 0)
        return;
    BUMP(c, acked, n);
    pthread_mutex_lock(&c->mu);
    c->st.inflight = c->inflight;
    pthread_mutex_unlock(&c->mu);
    if (!c->acked_this_session) {
        c->acked_this_session = true;
        rep__backoff_reset(&c->backoff); /* the remote works: the next failure starts small */
    }
    c->ops->acked(c->owner, ln, last);
}

static void fail(rep_mosq_t *c, const char *fmt, const char *arg)
{
    if (c->fail)
        return; /* the first reason is the one that counts */
    c->fail = true;
    snprintf(c->fail_why, sizeof c->fail_why, fmt, arg);
}

/* ---- libmosquitto's callbacks (inside its loop calls, this thread) -------------- */

static const char *connack_words(int rc, int protocol)
{
    if (protocol == 5)
        return mosquitto_reason_string(rc);
    return mosquitto_connack_string(rc);
}

static void on_connect(struct mosquitto *m, void *arg, int rc, int flags, const mosquitto_property *props)
{
    (void)flags;
    rep_mosq_t *c = arg;
    if (rc != 0) {
        char why[160];
        snprintf(why, sizeof why, "CONNACK: %s (0x%02x)", connack_words(rc, c->o.protocol), rc);
        c->refused = true;
        fail(c, "%s", why);
        return;
    }
    uint16_t recv_max = 0;
    c->window = c->o.max_inflight;
    if (props && mosquitto_property_read_int16(props, MQTT_PROP_RECEIVE_MAXIMUM, &recv_max, false) && recv_max &&
        recv_max < c->window)
        c->window = recv_max;
    rep__timer_cancel(&c->timers, &c->t_connect);
    /* The log callback is there for OpenSSL's reason of a failed handshake;
     * once up, libmosquitto would format a line for every packet. */
    mosquitto_log_callback_set(m, NULL);
    c->up_since_ms = tb_mono_ms();
    c->acked_this_session = false;
    pthread_mutex_lock(&c->mu);
    c->st.sessions++;
    c->st.window = c->window;
    c->st.state = REP_MOSQ_UP;
    pthread_mutex_unlock(&c->mu);
    tb_info("mqtt output connected", TB_S("client_id", c->o.client_id), TB_S("host", c->o.host),
            TB_I("port", c->o.port), TB_I("window", c->window));
    if (c->o.nsubscribe) {
        int rc2 = mosquitto_subscribe_multiple(m, &c->subs_mid, (int)c->o.nsubscribe, c->subs, 1, 0, NULL);
        c->subs_pending = true;
        if (rc2 != MOSQ_ERR_SUCCESS)
            fail(c, "SUBSCRIBE: %s", mosquitto_strerror(rc2));
    }
}

static void on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *granted,
                         const mosquitto_property *props)
{
    (void)m;
    (void)props;
    rep_mosq_t *c = arg;
    if (mid != c->subs_mid || !c->subs_pending)
        return;
    c->subs_pending = false;
    for (int i = 0; i < n && i < (int)c->o.nsubscribe; i++) {
        if (granted[i] < 0x80)
            continue;
        char why[200];
        snprintf(why, sizeof why, "SUBACK refused %.120s (0x%02x)", c->subs[i], granted[i]);
        c->refused = c->bye = true;
        fail(c, "%s", why);
        if (c->sops->subscribed)
            c->sops->subscribed(c->owner, c->subs[i], granted[i]);
        return;
    }
    if (c->sops->subscribed)
        c->sops->subscribed(c->owner, NULL, 0);
}

static void on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg,
                       const mosquitto_property *props)
{
    (void)m;
    (void)props;
    rep_mosq_t *c = arg;
    if (c->sops->message)
        c->sops->message(c->owner, msg->topic, msg->payload, (size_t)msg->payloadlen, msg->retain);
}

static void on_disconnect(struct mosquitto *m, void *arg, int rc, const mosquitto_property *props)
{
    (void)m;
    (void)props;
    rep_mosq_t *c = arg;
    char why[160];
    snprintf(why, sizeof why, "connection lost: %s (%d)",
             c->o.protocol == 5 && rc > 0 && rc >= 0x80 ? mosquitto_reason_string(rc) : mosquitto_strerror(rc), rc);
    fail(c, "%s", why);
}

static void on_publish(struct mosquitto *m, void *arg, int mid, int reason, const mosquitto_property *props)
{
    (void)m;
    (void)props;
    rep_mosq_t *c = arg;
    if (c->fw_mid && mid == c->fw_mid) {
        /* the farewell's PUBACK: the remote read every QoS 0 message before it */
        c->fw_mid = 0;
        for (uint32_t i = 0; i < c->o.max_inflight; i++)
            if (c->slots[i].sent_ms && c->slots[i].mid == 0 && c->slots[i].seq < c->fw_seq)
                c->slots[i].acked = true;
        for (uint32_t ln = 0; ln < c->nlanes; ln++)
            lane_flush(c, ln);
        c->bye = true;
        fail(c, "%s", "farewell sent");
        return;
    }
    if (c->o.qos == 0 || mid <= 0 || mid >= MID_MAX)
        return; /* QoS 0: fired on write, not an ack */
    int32_t i = c->mid_slot[mid];
    if (i < 0)
        return;
    if (reason >= 0x80) {
        /* The remote refused this message: hold the lane's order by ending
         * the session; the owner resends from its checkpoint after backoff. */
        char why[160];
        snprintf(why, sizeof why, "PUBACK refused: %s (0x%02x)", mosquitto_reason_string(reason), reason);
        fail(c, "%s", why);
        return;
    }
    c->mid_slot[mid] = -1;
    c->slots[i].acked = true;
    lane_flush(c, c->slots[i].lane);
}

static void on_unsubscribe(struct mosquitto *m, void *arg, int mid, const mosquitto_property *props)
{
    (void)m;
    (void)props;
    rep_mosq_t *c = arg;
    if (mid != c->confirm_mid || !c->confirm_mid)
        return;
    c->confirm_mid = 0;
    for (uint32_t i = 0; i < c->o.max_inflight; i++) {
        slot_t *s = &c->slots[i];
        if (s->sent_ms && !s->acked && s->mid == 0 && s->seq < c->confirm_seq)
            s->acked = true;
    }
    for (uint32_t ln = 0; ln < c->nlanes; ln++)
        lane_flush(c, ln);
}

static void on_log(struct mosquitto *m, void *arg, int level, const char *line)
{
    (void)m;
    (void)level;
    rep_mosq_t *c = arg;
    if (strncmp(line, "OpenSSL Error", 13) == 0 && !c->tls_err[0]) {
        const char *p = strchr(line, ':');
        snprintf(c->tls_err, sizeof c->tls_err, "%s", p ? p + 2 : line);
    }
}

/* ---- the session ----------------------------------------------------------------- */

static void schedule_retry(rep_mosq_t *c, bool refused)
{
    uint32_t ms = rep__backoff_next(&c->backoff, &c->rng);
    pthread_mutex_lock(&c->mu);
    c->st.backoff_ms = ms;
    c->st.state = refused ? REP_MOSQ_REFUSED : REP_MOSQ_BACKOFF;
    pthread_mutex_unlock(&c->mu);
    rep__timer_arm(&c->timers, &c->t_retry, tb_mono_ms() + ms);
}

/* Ends the attempt or session: the handle goes (no DISCONNECT: the remote
 * may be gone), everything unacked is forgotten and the owner told. */
static void session_end(rep_mosq_t *c, const char *why)
{
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
    uint64_t suppressed;
    char full[256];
    if (c->tls_err[0])
        snprintf(full, sizeof full, "%s; TLS: %s", why, c->tls_err);
    else
        snprintf(full, sizeof full, "%s", why);
    bool refused = c->refused, bye = c->bye;
    if (bye && c->m) {
        mosquitto_disconnect_v5(c->m, 0, NULL); /* normal: the broker drops the will */
        mosquitto_loop_write(c->m, 1);
    }
    if (!(bye && !refused) && tb_ratelimit(&rl, &suppressed))
        tb_warn("mqtt output: connection failed", TB_S("client_id", c->o.client_id), TB_S("host", c->o.host),
                TB_I("port", c->o.port), TB_S("error", full), TB_U("suppressed", suppressed));
    if (c->m) {
        mosquitto_destroy(c->m);
        c->m = NULL;
    }
    rep__timer_cancel(&c->timers, &c->t_connect);
    rep__timer_cancel(&c->timers, &c->t_tick);
    rep__timer_cancel(&c->timers, &c->t_fw);
    c->subs_pending = c->bye = false;
    c->subs_mid = c->fw_mid = 0;
    if (c->fw_on && c->fw_final)
        atomic_store(&c->stop, true);
    c->fw_on = false;
    if (c->up_since_ms && tb_mono_ms() - c->up_since_ms > c->o.retry_max_ms)
        rep__backoff_reset(&c->backoff); /* a long session: the next failure starts small */
    c->up_since_ms = 0;
    uint32_t lost = c->inflight;
    slots_reset(c);
    pthread_mutex_lock(&c->mu);
    snprintf(c->st.last_error, sizeof c->st.last_error, "%s", full);
    c->st.failures += !(bye && !refused);
    if (refused)
        c->st.refusals++;
    c->st.unsent_lost += lost;
    c->st.inflight = 0;
    pthread_mutex_unlock(&c->mu);
    c->fail = false;
    c->refused = false;
    c->tls_err[0] = 0;
    if (c->handed) {
        c->handed = false;
        c->ops->session_lost(c->owner);
    }
    schedule_retry(c, refused);
}

static int setup_tls(rep_mosq_t *c, char *why, size_t n)
{
    const char *ca = c->o.ca_file && *c->o.ca_file ? c->o.ca_file : NULL;
    const char *cert = c->o.cert_file && *c->o.cert_file ? c->o.cert_file : NULL;
    const char *key = c->o.key_file && *c->o.key_file ? c->o.key_file : NULL;
    int rc;
    if (!ca) {
        mosquitto_int_option(c->m, MOSQ_OPT_TLS_USE_OS_CERTS, 1);
        rc = mosquitto_tls_set(c->m, NULL, "/etc/ssl/certs", cert, key, NULL);
    } else {
        rc = mosquitto_tls_set(c->m, ca, NULL, cert, key, NULL);
    }
    if (rc == MOSQ_ERR_SUCCESS)
        rc = mosquitto_tls_opts_set(c->m, c->o.tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, "tlsv1.2", NULL);
    if (rc == MOSQ_ERR_SUCCESS)
        rc = mosquitto_tls_insecure_set(c->m, !c->o.tls_verify);
    if (rc != MOSQ_ERR_SUCCESS) {
        snprintf(why, n, "TLS setup: %s", mosquitto_strerror(rc));
        return -1;
    }
    return 0;
}

/* A fresh handle and an asynchronous connect. On failure the attempt ends
 * at once (backoff). */
static void attempt(rep_mosq_t *c)
{
    char why[200];
    BUMP(c, attempts, 1);
    set_state(c, REP_MOSQ_CONNECTING);
    c->tcp_up = false;
    c->m = mosquitto_new(c->o.client_id, c->o.clean_session, c);
    if (!c->m) {
        session_end(c, "mosquitto_new failed");
        return;
    }
    mosquitto_threaded_set(c->m, true);
    mosquitto_int_option(c->m, MOSQ_OPT_PROTOCOL_VERSION, c->o.protocol == 5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
    mosquitto_int_option(c->m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_int_option(c->m, MOSQ_OPT_SEND_MAXIMUM, (int)c->o.max_inflight);
    mosquitto_max_inflight_messages_set(c->m, 0); /* our window bounds what is in flight */
    mosquitto_connect_v5_callback_set(c->m, on_connect);
    mosquitto_disconnect_v5_callback_set(c->m, on_disconnect);
    mosquitto_publish_v5_callback_set(c->m, on_publish);
    mosquitto_unsubscribe_v5_callback_set(c->m, on_unsubscribe);
    mosquitto_subscribe_v5_callback_set(c->m, on_subscribe);
    mosquitto_message_v5_callback_set(c->m, on_message);
    mosquitto_log_callback_set(c->m, on_log);
    if (c->sops->connecting) {
        rep_mosq_will_t w = { 0 };
        c->sops->connecting(c->owner, c->st.attempts, &w); /* attempts: written by this thread only */
        if (w.topic && mosquitto_will_set_v5(c->m, w.topic, (int)w.payload_len, w.payload, 1, false, NULL) !=
                           MOSQ_ERR_SUCCESS) {
            session_end(c, "the will is not valid");
            return;
        }
    }
    if (c->o.username && *c->o.username)
        mosquitto_username_pw_set(c->m, c->o.username, c->password);
    if (c->o.tls && setup_tls(c, why, sizeof why) < 0) {
        session_end(c, why);
        return;
    }
    rep__timer_arm(&c->timers, &c->t_connect, tb_mono_ms() + c->o.connect_timeout_ms);
    rep__timer_arm(&c->timers, &c->t_tick, tb_mono_ms() + TICK_MS);
    errno = 0;
    int rc = mosquitto_connect_async(c->m, c->o.host, c->o.port, (int)c->o.keepalive_s);
    if (rc != MOSQ_ERR_SUCCESS) {
        snprintf(why, sizeof why, "connect %s:%d: %s", c->o.host, c->o.port,
                 rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        session_end(c, why);
    }
}

/* QoS 0: asks the remote to confirm what was sent (OUTPUTS.md 4.4). */
static void confirm_qos0(rep_mosq_t *c)
{
    if (c->o.qos != 0 || c->confirm_mid || c->inflight == 0)
        return;
    bool unconfirmed = false;
    for (uint32_t i = 0; i < c->o.max_inflight && !unconfirmed; i++)
        unconfirmed = c->slots[i].sent_ms && !c->slots[i].acked;
    if (!unconfirmed)
        return;
    int mid = 0;
    int rc = mosquitto_unsubscribe_v5(c->m, &mid, c->confirm_topic, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        fail(c, "UNSUBSCRIBE: %s", mosquitto_strerror(rc));
        return;
    }
    c->confirm_mid = mid;
    c->confirm_seq = c->seq;
}

/* Hands messages to libmosquitto while the window has room. */
static void pump(rep_mosq_t *c)
{
    if (!c->m || c->fail || c->st.state != REP_MOSQ_UP || c->subs_pending || c->fw_on)
        return;
    uint32_t room = c->o.qos == 0 ? c->o.max_inflight : c->window;
    while (c->inflight < room && !c->fail) {
        rep_mosq_msg_t msg = { 0 };
        if (c->ops->next(c->owner, &msg) <= 0)
            break;
        if (msg.lane >= c->nlanes) {
            mosquitto_property_free_all(&msg.props);
            fail(c, "%s", "owner handed out a message of an unknown lane");
            break;
        }
        int32_t i = c->free_head;
        slot_t *s = &c->slots[i];
        c->free_head = s->next;
        int mid = 0;
        int rc = mosquitto_publish_v5(c->m, &mid, msg.topic, (int)msg.payload_len, msg.payload, c->o.qos, false,
                                      c->o.protocol == 5 ? msg.props : NULL);
        mosquitto_property_free_all(&msg.props);
        *s = (slot_t){ .token = msg.token, .sent_ms = tb_mono_ms(), .seq = c->seq++, .lane = msg.lane,
                       .next = -1, .mid = c->o.qos ? mid : 0 };
        lane_t *l = &c->lanes[msg.lane];
        if (l->tail >= 0)
            c->slots[l->tail].next = i;
        else
            l->head = i;
        l->tail = i;
        c->inflight++;
        c->handed = true;
        if (rc != MOSQ_ERR_SUCCESS) {
            fail(c, "PUBLISH: %s", mosquitto_strerror(rc));
            break;
        }
        if (c->o.qos && mid > 0 && mid < MID_MAX)
            c->mid_slot[mid] = i;
        BUMP(c, sent, 1);
    }
    pthread_mutex_lock(&c->mu);
    c->st.inflight = c->inflight;
    pthread_mutex_unlock(&c->mu);
    if (!c->fail)
        confirm_qos0(c);
}

/* The one-second tick: keepalive, then the ack deadline. */
static void tick(rep_mosq_t *c, uint64_t now)
{
    rep__timer_arm(&c->timers, &c->t_tick, now + TICK_MS);
    if (c->st.state == REP_MOSQ_UP) {
        int rc = mosquitto_loop_misc(c->m);
        if (rc != MOSQ_ERR_SUCCESS) {
            fail(c, "keepalive: %s", mosquitto_strerror(rc));
            return;
        }
    }
    uint64_t oldest = 0;
    for (uint32_t i = 0; i < c->o.max_inflight; i++) {
        const slot_t *s = &c->slots[i];
        if (s->sent_ms && !s->acked && (!oldest || s->sent_ms < oldest))
            oldest = s->sent_ms;
    }
    if (c->subs_pending && now - c->up_since_ms > c->o.ack_timeout_ms)
        oldest = c->up_since_ms; /* no SUBACK: as silent as no ack */
    if (oldest && now - oldest > c->o.ack_timeout_ms) {
        char why[96];
        snprintf(why, sizeof why, "no ack within %u ms", c->o.ack_timeout_ms);
        fail(c, "%s (silent remote)", why);
    }
}

static void run_timers(rep_mosq_t *c)
{
    uint64_t now = tb_mono_ms();
    rep__timer_t *tm;
    while ((tm = rep__timer_pop_due(&c->timers, now))) {
        if (tm == &c->t_connect) {
            char why[96];
            snprintf(why, sizeof why, "no CONNACK within %u ms", c->o.connect_timeout_ms);
            fail(c, "%s", why);
        } else if (tm == &c->t_tick && c->m) {
            tick(c, now);
        } else if (tm == &c->t_retry && !c->m) {
            attempt(c);
        } else if (tm == &c->t_fw && c->m) {
            fail(c, "%s", "farewell: no PUBACK in time");
        }
    }
}

/* Takes a farewell asked for: publishes it at QoS 1 behind what was sent. */
static void farewell_take(rep_mosq_t *c)
{
    if (c->fw_on || !atomic_exchange(&c->fw_req, false))
        return;
    pthread_mutex_lock(&c->mu);
    bool up = c->m && !c->fail && c->st.state == REP_MOSQ_UP && !c->subs_pending;
    int rc = MOSQ_ERR_SUCCESS;
    c->fw_on = true;
    if (up)
        rc = mosquitto_publish_v5(c->m, &c->fw_mid, c->fw_topic, (int)c->fw_len, c->fw_payload, 1, false, NULL);
    uint32_t wait_ms = c->fw_wait_ms;
    pthread_mutex_unlock(&c->mu);
    if (!up) {
        c->fw_on = false;
        if (c->fw_final)
            atomic_store(&c->stop, true);
        return;
    }
    c->fw_seq = c->seq;
    if (rc != MOSQ_ERR_SUCCESS)
        fail(c, "farewell: %s", mosquitto_strerror(rc));
    else
        rep__timer_arm(&c->timers, &c->t_fw, tb_mono_ms() + wait_ms);
}

/* Our ACK of what the remote sent goes at once, not after the kernel's delayed-ACK timer
 * (40 ms on Linux). A broker that leaves Nagle on (Mosquitto's default: set_tcp_nodelay false)
 * holds its next PUBACK until its last segment is acknowledged; with our ACK delayed, each
 * such wait held acks 40 ms, and with memory_first's ack: upstream the publishers' PUBACKs
 * with them (the live p99 was 38-40 ms, docs/REPLICATION.md "Live latency"). Asked only on a
 * turn that read and sent nothing: a PUBLISH we send carries the ACK anyway, and quick-ack on
 * every read of a drain costs its rate (more, smaller PUBACK segments: 42k -> 36k msg/s at
 * window 100). Setting TCP_QUICKACK sends a delayed ACK that is pending now (Linux). */
static void quickack(rep_mosq_t *c)
{
    int fd = c->m ? mosquitto_socket(c->m) : -1;
    int one = 1;
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

/* A turn that hands several PUBLISHes to libmosquitto (a backlog draining) writes them corked:
 * libmosquitto writes one packet per write(2), which with TCP_NODELAY is one segment each, and
 * the remote then reads (and wakes) once per message; corked, the turn's packets leave together
 * when it ends. Measured (bench_outputs --only drain --count 100000, quiet box, 2026-12-03):
 * window 1000 39-41k -> 53-55k msg/s, our CPU per message halved; a live turn sends one and is
 * not corked (no latency added). true when set. */
static bool cork(rep_mosq_t *c, int on)
{
    int fd = mosquitto_socket(c->m);
    return fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on) == 0;
}

static void io(rep_mosq_t *c, short revents)
{
    if (!c->tcp_up && (revents & (POLLOUT | POLLERR | POLLHUP)))
        c->tcp_up = true;
    if (c->st.state == REP_MOSQ_CONNECTING) {
        /* Before the CONNACK: libmosquitto 2.0.11 finishes a TCP connect
         * that was pending, and the TLS handshake after it, only in
         * mosquitto_loop (its want_connect step; mosquitto_loop_read and
         * _write skip it). With a zero timeout its select() returns at once. */
        int rc = mosquitto_loop(c->m, 0, 64);
        if (rc != MOSQ_ERR_SUCCESS)
            fail(c, "connect: %s", rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        int rc = mosquitto_loop_read(c->m, 64);
        if (rc != MOSQ_ERR_SUCCESS)
            fail(c, "read: %s", rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        else
            c->read_turn = true;
        /* TLS may hold decrypted records the socket no longer shows: drain
         * them now, or poll() would wait on bytes already read. */
        for (int i = 0; i < 64 && !c->fail && c->m; i++) {
            SSL *ssl = mosquitto_ssl_get(c->m);
            if (!ssl || SSL_pending(ssl) <= 0)
                break;
            rc = mosquitto_loop_read(c->m, 64);
            if (rc != MOSQ_ERR_SUCCESS)
                fail(c, "read: %s", mosquitto_strerror(rc));
        }
    }
    if (!c->fail && (revents & POLLOUT)) {
        int rc = mosquitto_loop_write(c->m, 64);
        if (rc != MOSQ_ERR_SUCCESS)
            fail(c, "write: %s", rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
    }
}

static void *conn_main(void *arg)
{
    rep_mosq_t *c = arg;
    attempt(c);
    while (!atomic_load(&c->stop)) {
        if (c->fail && c->m)
            session_end(c, c->fail_why);
        struct pollfd p[2] = { { .fd = c->efd, .events = POLLIN }, { .fd = -1 } };
        nfds_t n = 1;
        if (c->m && mosquitto_socket(c->m) >= 0) {
            p[1].fd = mosquitto_socket(c->m);
            /* POLLOUT until the TCP connect completed (it may be pending), then
             * only while libmosquitto has bytes queued */
            p[1].events = POLLIN | (!c->tcp_up || mosquitto_want_write(c->m) ? POLLOUT : 0);
            n = 2;
        }
        int timeout = -1;
        rep__timer_t *tm = rep__timer_peek(&c->timers);
        uint64_t due = tm ? tm->due : 0;
        if (c->idle_due && (!due || c->idle_due < due))
            due = c->idle_due;
        if (due) {
            uint64_t now = tb_mono_ms();
            timeout = due <= now ? 0 : (int)TB_MIN(due - now, (uint64_t)INT32_MAX);
        }
        int r = poll(p, n, timeout);
        if (r < 0 && errno != EINTR) {
            tb_error("mqtt output: poll failed", TB_S("error", strerror(errno)));
            break;
        }
        if (r > 0 && (p[0].revents & POLLIN)) {
            uint64_t v;
            if (read(c->efd, &v, sizeof v) < 0 && errno != EAGAIN)
                tb_warn("mqtt output: eventfd read failed", TB_S("error", strerror(errno)));
        }
        atomic_store(&c->kicked, false);
        if (atomic_load(&c->stop))
            break;
        if (c->m && r > 0 && n == 2 && p[1].revents)
            io(c, p[1].revents);
        if (c->fail && c->m) {
            session_end(c, c->fail_why);
            continue;
        }
        run_timers(c);
        if (c->ops->idle) {
            int ms = c->ops->idle(c->owner);
            c->idle_due = ms >= 0 ? tb_mono_ms() + (uint64_t)ms : 0;
        }
        farewell_take(c);
        uint64_t seq0 = c->seq;
        pump(c);
        bool corked = c->m && !c->fail && c->seq - seq0 > 1 && cork(c, 1);
        if (c->m && !c->fail && mosquitto_want_write(c->m)) {
            int rc = mosquitto_loop_write(c->m, 64);
            if (rc != MOSQ_ERR_SUCCESS)
                fail(c, "write: %s", rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        }
        if (corked && c->m)
            cork(c, 0); /* what the turn wrote goes now, in full segments */
        if (c->read_turn && c->seq == seq0 && !c->fail)
            quickack(c);
        c->read_turn = false;
    }
    if (c->m) {
        mosquitto_destroy(c->m);
        c->m = NULL;
    }
    set_state(c, REP_MOSQ_STOPPED);
    return NULL;
}

/* ---- public ---------------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? tb_strdup(s) : NULL;
}

static int read_password(const char *path, char **out, char *err, size_t errlen);

int rep__mosq_check_files(const rep_mosq_opts_t *o, char *err, size_t errlen)
{
    if (o->password_file && *o->password_file) {
        char *password = NULL;
        int rc = read_password(o->password_file, &password, err, errlen);
        if (rc < 0)
            return rc;
        explicit_bzero(password, strlen(password));
        free(password);
    }
    const char *files[] = { o->tls ? o->ca_file : NULL, o->tls ? o->cert_file : NULL, o->tls ? o->key_file : NULL };
    const char *what[] = { "tls.ca_file", "tls.cert_file", "tls.key_file" };
    for (size_t i = 0; i < TB_ARRAY_LEN(files); i++) {
        if (!files[i] || !*files[i])
            continue;
        FILE *f = fopen(files[i], "re");
        if (!f) {
            int e = errno;
            snprintf(err, errlen, "%s %s: %s", what[i], files[i], strerror(e));
            return -e;
        }
        fclose(f);
    }
    return 0;
}

static int read_password(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "password_file %s: %s", path, strerror(e));
        return -e;
    }
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t len = strcspn(buf, "\r\n");
    if (len == 0) {
        explicit_bzero(buf, sizeof buf);
        snprintf(err, errlen, "password_file %s: the first line is empty", path);
        return TB_ECONFIG;
    }
    *out = tb_strndup(buf, len);
    explicit_bzero(buf, sizeof buf);
    return 0;
}

static void lib_init(void)
{
    mosquitto_lib_init(); /* once per process; never cleaned up (other handles may live) */
}

int rep__mosq_new(const rep_mosq_opts_t *opts, uint32_t nlanes, const rep_mosq_owner_ops_t *ops, void *owner,
                  rep_mosq_t **out, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, lib_init);
    *out = NULL;
    const rep_mosq_opts_t *o = opts;
    const char *bad = NULL;
    if (!o->host || !*o->host)
        bad = "host is empty";
    else if (o->port <= 0 || o->port > 65535)
        bad = "port is out of range";
    else if (!o->client_id || !*o->client_id)
        bad = "client_id is empty";
    else if (o->protocol != 4 && o->protocol != 5)
        bad = "protocol must be 4 or 5";
    else if (o->qos < 0 || o->qos > 2)
        bad = "qos must be 0, 1 or 2";
    else if (o->qos == 2 && !o->clean_session)
        bad = "qos 2 needs a clean session (a fresh handle renumbers packet ids: the remote would "
              "swallow a reused one as a duplicate)";
    else if (o->max_inflight < 1 || o->max_inflight > 65535)
        bad = "max_inflight must be 1..65535";
    else if (o->keepalive_s < 5 || o->keepalive_s > 65535)
        bad = "keepalive_s must be 5..65535";
    else if (nlanes < 1 || !ops || !ops->next || !ops->acked || !ops->session_lost)
        bad = "no lanes or no owner callbacks";
    else if (o->retry_initial_ms < 1 || o->retry_max_ms < o->retry_initial_ms)
        bad = "retry_initial_ms must be >= 1 and <= retry_max_ms";
    else if (o->connect_timeout_ms < 1 || o->ack_timeout_ms < 1)
        bad = "connect_timeout_ms and ack_timeout_ms must be >= 1";
    else if (o->nsubscribe && !o->subscribe)
        bad = "nsubscribe without topics";
    if (bad) {
        snprintf(err, errlen, "mqtt output: %s", bad);
        return TB_ECONFIG;
    }
    char *password = NULL;
    if (o->password_file && *o->password_file) {
        int rc = read_password(o->password_file, &password, err, errlen);
        if (rc < 0)
            return rc;
    }
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) {
        int e = errno;
        if (password) {
            explicit_bzero(password, strlen(password));
            free(password);
        }
        snprintf(err, errlen, "mqtt output: eventfd: %s", strerror(e));
        return -e;
    }
    rep_mosq_t *c = tb_calloc(1, sizeof *c);
    c->o = *o;
    c->o.host = tb_strdup(o->host);
    c->o.client_id = tb_strdup(o->client_id);
    c->o.ca_file = dup_or_null(o->ca_file);
    c->o.cert_file = dup_or_null(o->cert_file);
    c->o.key_file = dup_or_null(o->key_file);
    c->o.username = dup_or_null(o->username);
    c->o.password_file = dup_or_null(o->password_file);
    c->password = password;
    size_t tl = strlen("tributary/confirm/") + strlen(o->client_id) + 1;
    c->confirm_topic = tb_malloc(tl);
    snprintf(c->confirm_topic, tl, "tributary/confirm/%s", o->client_id);
    c->o.subscribe = NULL;
    c->subs = o->nsubscribe ? tb_calloc(o->nsubscribe, sizeof *c->subs) : NULL;
    for (uint32_t i = 0; i < o->nsubscribe; i++)
        c->subs[i] = tb_strdup(o->subscribe[i]);
    static const rep_mosq_session_ops_t no_sops;
    c->ops = ops;
    c->sops = &no_sops;
    c->owner = owner;
    c->nlanes = nlanes;
    c->lanes = tb_calloc(nlanes, sizeof *c->lanes);
    c->slots = tb_calloc(o->max_inflight, sizeof *c->slots);
    c->mid_slot = tb_malloc(MID_MAX * sizeof *c->mid_slot);
    slots_reset(c);
    c->window = o->max_inflight;
    c->backoff = (rep__backoff_t){ .initial_ms = o->retry_initial_ms, .max_ms = o->retry_max_ms,
                                   .full_jitter = false }; /* [cap/2, cap]: a floor, never a spin */
    c->rng = (tb_mono_ms() << 16) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c;
    if (!c->rng)
        c->rng = 1;
    c->efd = efd;
    pthread_mutex_init(&c->mu, NULL);
    c->st.state = REP_MOSQ_IDLE;
    c->st.window = c->window;
    *out = c;
    return 0;
}

void rep__mosq_set_session_ops(rep_mosq_t *c, const rep_mosq_session_ops_t *ops)
{
    c->sops = ops;
}

int rep__mosq_start(rep_mosq_t *c)
{
    if (c->started)
        return 0;
    int rc = pthread_create(&c->thread, NULL, conn_main, c);
    if (rc)
        return -rc;
    c->started = true;
    return 0;
}

void rep__mosq_run(rep_mosq_t *c)
{
    (void)conn_main(c);
}

void rep__mosq_request_stop(rep_mosq_t *c)
{
    atomic_store(&c->stop, true);
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        tb_warn("mqtt output: eventfd write failed", TB_S("error", strerror(errno)));
}

void rep__mosq_kick(rep_mosq_t *c)
{
    if (atomic_exchange(&c->kicked, true))
        return;
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        tb_warn("mqtt output: eventfd write failed", TB_S("error", strerror(errno)));
}

void rep__mosq_stop(rep_mosq_t *c)
{
    if (!c->started)
        return;
    atomic_store(&c->stop, true);
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        tb_warn("mqtt output: eventfd write failed", TB_S("error", strerror(errno)));
    pthread_join(c->thread, NULL);
    c->started = false;
}

void rep__mosq_farewell(rep_mosq_t *c, const char *topic, const void *payload, size_t len, uint32_t wait_ms,
                        bool final)
{
    pthread_mutex_lock(&c->mu);
    free(c->fw_topic);
    free(c->fw_payload);
    c->fw_topic = tb_strdup(topic);
    c->fw_payload = tb_malloc(len ? len : 1);
    memcpy(c->fw_payload, payload, len);
    c->fw_len = len;
    c->fw_wait_ms = wait_ms;
    c->fw_final = final;
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->fw_req, true);
    uint64_t one = 1;
    if (write(c->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        tb_warn("mqtt output: eventfd write failed", TB_S("error", strerror(errno)));
    if (final && c->started) {
        pthread_join(c->thread, NULL);
        c->started = false;
    }
}

void rep__mosq_free(rep_mosq_t *c)
{
    if (!c)
        return;
    rep__mosq_stop(c);
    if (c->m)
        mosquitto_destroy(c->m);
    if (c->password) {
        explicit_bzero(c->password, strlen(c->password));
        free(c->password);
    }
    free((char *)c->o.host);
    free((char *)c->o.client_id);
    free((char *)c->o.ca_file);
    free((char *)c->o.cert_file);
    free((char *)c->o.key_file);
    free((char *)c->o.username);
    free((char *)c->o.password_file);
    free(c->confirm_topic);
    for (uint32_t i = 0; i < c->o.nsubscribe; i++)
        free(c->subs[i]);
    free(c->subs);
    free(c->fw_topic);
    free(c->fw_payload);
    free(c->lanes);
    free(c->slots);
    free(c->mid_slot);
    rep__heap_free(&c->timers);
    close(c->efd);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
