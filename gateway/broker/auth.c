/*
 * auth.c: who may connect, and what a client may write.
 *
 * At CONNECT, before anything touches a session (an impostor must not take
 * a session over): a user name is checked against the password file
 * (gateway/auth) on libuv's thread pool, since PBKDF2 is slow by design and
 * the loop serves every other client meanwhile. The connection is not read
 * while its check runs; the CONNECT's bytes are kept (counted in
 * mqtt.max_partial_bytes) and decoded again when the answer comes, and the
 * bytes the client pipelined after it wait in its input buffer.
 * mqtt.connect_timeout_ms covers the wait.
 *
 * Refusals (docs/SECURITY.md): a wrong password or an unknown user, MQTT 5
 * 0x86 / 3.1.1 4; no user name where anonymous clients are not allowed,
 * 0x87 / 5. Each failure counts against the peer's address: past
 * auth.max_failures within auth.failure_window_ms its CONNECTs wait
 * auth.throttle_delay_ms before they are checked (throttle: delay) or are
 * refused unchecked, 0x9F / 3 (throttle: refuse). The table of addresses
 * is fixed in size (AUTH_TABLE slots): an attacker with many addresses
 * evicts the oldest entries, it cannot grow the gateway.
 *
 * At most one check per core but one runs at once (auth_parallel(); one
 * on a 2-core appliance): a storm of logins must not take the loop's core,
 * and the rest wait in a FIFO, in order (their connect timeout runs).
 *
 * A TLS listener with use_identity_as_username has already authenticated
 * its client by certificate (tls.c): its CN is the user name, for the ACL.
 *
 * The password file and the ACL are reference counted: a check in flight
 * keeps the file it began with while SIGHUP swaps in the next one.
 */
#include "gateway/broker/broker_int.h"

#include <stdlib.h>
#include <string.h>

#define AUTH_TABLE 4096 /* addresses remembered for throttling */
#define AUTH_PROBE 8    /* slots looked at per address */

typedef struct broker_auth_req {
    uv_work_t work;
    struct broker_auth_req *next; /* waiting for a free check (srv->auth_wait) */
    bool waiting;
    uv_timer_t delay;      /* throttle: delay */
    bool delaying;
    broker_conn_t *c;      /* a reference (refs) until the answer */
    auth_passwd_t *pw;     /* a reference */
    uint8_t *packet;       /* the CONNECT, decoded again after the check */
    size_t packet_len;
    const uint8_t *user, *pass;
    size_t user_len, pass_len;
    auth_result_t result;
} broker_auth_req_t;

/* ---- the addresses that failed --------------------------------------------- */

typedef struct broker_auth_addr {
    char host[48];
    uint32_t failures;
    uint64_t window_start_ms;
} broker_auth_addr_t;

static uint32_t hash_host(const char *h)
{
    uint32_t x = 2166136261u; /* FNV-1a */
    for (; *h; h++)
        x = (x ^ (uint8_t)*h) * 16777619u;
    return x;
}

/* The entry for c's address; create: make one (evicting the oldest of its slots). */
static broker_auth_addr_t *addr_entry(broker_t *srv, const broker_conn_t *c, bool create)
{
    if (!srv->auth_addrs) {
        if (!create)
            return NULL;
        srv->auth_addrs = tb_calloc(AUTH_TABLE, sizeof *srv->auth_addrs);
    }
    char host[48];
    broker__addr_host(&c->peer, host, sizeof host);
    uint32_t h = hash_host(host);
    uint64_t now = uv_now(srv->loop);
    broker_auth_addr_t *victim = NULL;
    for (uint32_t i = 0; i < AUTH_PROBE; i++) {
        broker_auth_addr_t *e = &srv->auth_addrs[(h + i) % AUTH_TABLE];
        if (e->host[0] && strcmp(e->host, host) == 0) {
            if (now - e->window_start_ms > srv->auth.failure_window_ms) {
                e->failures = 0; /* a window without a failure forgives */
                e->window_start_ms = now;
            }
            return e;
        }
        if (!victim || !e->host[0] || (victim->host[0] && e->window_start_ms < victim->window_start_ms))
            victim = e;
    }
    if (!create)
        return NULL;
    memset(victim, 0, sizeof *victim);
    memcpy(victim->host, host, sizeof host);
    victim->window_start_ms = now;
    return victim;
}

static bool throttled(broker_t *srv, const broker_conn_t *c)
{
    if (srv->auth.max_failures == 0)
        return false;
    broker_auth_addr_t *e = addr_entry(srv, c, false);
    return e && e->failures >= srv->auth.max_failures;
}

static void failed(broker_t *srv, const broker_conn_t *c)
{
    if (srv->auth.max_failures == 0)
        return;
    broker_auth_addr_t *e = addr_entry(srv, c, true);
    if (++e->failures == srv->auth.max_failures) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("authentication: an address failed auth.max_failures times; its CONNECTs are throttled",
                    TB_S("address", e->host), TB_U("failures", e->failures),
                    TB_S("throttle", srv->auth.throttle == CFG_THROTTLE_REFUSE ? "refuse" : "delay"),
                    TB_U("suppressed", skipped));
    }
}

/* ---- the decision ------------------------------------------------------------ */

static void refused(broker_conn_t *c, metrics_refuse_t why, uint8_t reason5, const char *what)
{
    broker_t *srv = c->srv;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("connection refused: authentication", TB_S("peer", broker__conn_peer(c)), TB_S("why", what),
                TB_S("reason", metrics_mqtt_refuse_reasons[why]), TB_U("suppressed", skipped));
    if (why != METRICS_REFUSE_AUTH_THROTTLED)
        failed(srv, c);
    broker__connect_refuse(c, why, reason5, what);
}

static bool anonymous_allowed(const broker_t *srv, const broker_conn_t *c)
{
    const cfg_listener_t *l = c->listener ? c->listener->cfg : NULL;
    if (l && l->allow_anonymous != CFG_ANON_AUTO)
        return l->allow_anonymous == CFG_ANON_TRUE; /* the listener's own choice */
    switch (srv->auth.allow_anonymous) {
    case CFG_ANON_TRUE: return true;
    case CFG_ANON_FALSE: return false;
    default: return srv->passwd == NULL;
    }
}

static void work_cb(uv_work_t *w)
{
    broker_auth_req_t *r = w->data;
    r->result = auth_passwd_check(r->pw, (const char *)r->user, r->user_len, r->pass, r->pass_len);
}

static void submit(broker_auth_req_t *r);

/* Checks that may run at once: one per core but one, at least one. */
static unsigned auth_parallel(void)
{
    unsigned n = uv_available_parallelism();
    return n > 2 ? n - 1 : 1;
}

/* The next waiting check, now that one ended. */
static void start_next(broker_t *srv)
{
    while (srv->auth_wait_head && srv->auth_running < auth_parallel()) {
        broker_auth_req_t *r = srv->auth_wait_head;
        srv->auth_wait_head = r->next;
        if (!srv->auth_wait_head)
            srv->auth_wait_tail = NULL;
        r->waiting = false;
        submit(r);
    }
}

static void req_free(broker_auth_req_t *r)
{
    broker_conn_t *c = r->c;
    if (c->auth == r)
        c->auth = NULL;
    c->srv->partial_bytes -= r->packet_len; /* held outside c->mem: c may have closed meanwhile */
    auth_passwd_unref(r->pw);
    free(r->packet);
    free(r);
    broker__conn_unref(c);
}

static void after_cb(uv_work_t *w, int status)
{
    broker_auth_req_t *r = w->data;
    broker_conn_t *c = r->c;
    broker_t *srv = c->srv;
    srv->auth_running--;
    c->auth = NULL;
    if (status == 0 && !c->closing) {
        mqtt_packet_t pkt;
        mqtt_diag_t diag;
        int rc = mqtt_decode(r->packet, r->packet_len, 0, broker__max_packet(c->srv->cfg), &pkt, &diag);
        if (rc <= 0) { /* it decoded a moment ago */
            broker__conn_close(c, MQTT_RC_UNSPECIFIED_ERROR, "CONNECT could not be decoded again");
        } else if (r->result != AUTH_OK) {
            bool unknown = r->result == AUTH_NO_USER;
            refused(c, unknown ? METRICS_REFUSE_AUTH_UNKNOWN_USER : METRICS_REFUSE_AUTH_BAD_PASSWORD,
                    MQTT_RC_BAD_USER_NAME_OR_PASSWORD,
                    unknown ? "no such user in auth.password_file" : "wrong password");
        } else {
            broker__connect_admit(c, &pkt);
            if (!c->closing)
                broker__conn_input_resume(c); /* what it sent after CONNECT, then reads */
        }
    }
    req_free(r);
    start_next(srv);
}

static void submit(broker_auth_req_t *r)
{
    broker_t *srv = r->c->srv;
    if (r->c->closing) {
        req_free(r);
        return;
    }
    if (srv->auth_running >= auth_parallel()) {
        r->waiting = true;
        r->next = NULL;
        if (srv->auth_wait_tail)
            srv->auth_wait_tail->next = r;
        else
            srv->auth_wait_head = r;
        srv->auth_wait_tail = r;
        return;
    }
    r->work.data = r;
    int rc = uv_queue_work(srv->loop, &r->work, work_cb, after_cb);
    if (rc < 0) {
        broker__conn_close(r->c, MQTT_RC_SERVER_UNAVAILABLE, "authentication could not be queued");
        req_free(r);
        return;
    }
    srv->auth_running++;
}

static void delay_closed(uv_handle_t *h)
{
    broker_auth_req_t *r = h->data;
    r->delaying = false;
    if (r->c->closing) {
        req_free(r);
        return;
    }
    submit(r);
}

static void delay_done(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, delay_closed);
}

void broker__auth_cancel(broker_conn_t *c)
{
    broker_auth_req_t *r = c->auth;
    if (r && r->waiting) { /* out of the FIFO, freed now */
        broker_t *srv = c->srv;
        broker_auth_req_t **pp = &srv->auth_wait_head, *prev = NULL;
        while (*pp && *pp != r) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = r->next;
            if (srv->auth_wait_tail == r)
                srv->auth_wait_tail = prev;
        }
        r->waiting = false;
        req_free(r);
        return;
    }
    if (r && r->delaying && !uv_is_closing((uv_handle_t *)&r->delay)) {
        uv_timer_stop(&r->delay);
        uv_close((uv_handle_t *)&r->delay, delay_closed); /* c is closing: freed there */
    }
    /* a check on the pool cannot be stopped: after_cb sees c closing */
}

broker_auth_t broker__auth_connect(broker_conn_t *c, const mqtt_packet_t *pkt, const uint8_t *raw, size_t rawlen)
{
    broker_t *srv = c->srv;
    const mqtt_connect_t *cn = &pkt->u.connect;
    free(c->username);
    c->username = NULL;
    const char *vouched = c->tp->user ? c->tp->user(c) : NULL;
    if (vouched) {
        /* tls.use_identity_as_username: its verified certificate names it; the CONNECT's user name and
         * password are not looked at (as Mosquitto does), nor throttled: the handshake was the check */
        c->username = tb_strdup(vouched);
        return BROKER_AUTH_OK;
    }
    if (!cn->has_username || cn->username.n == 0) { /* an empty user name is none */
        if (!anonymous_allowed(srv, c)) {
            refused(c, METRICS_REFUSE_AUTH_ANONYMOUS, MQTT_RC_NOT_AUTHORIZED,
                    "no user name, and anonymous clients are not allowed (auth.allow_anonymous, or the listener's)");
            return BROKER_AUTH_REFUSED;
        }
        return BROKER_AUTH_OK;
    }
    if (memchr(cn->username.p, '\0', cn->username.n)) {
        refused(c, METRICS_REFUSE_AUTH_BAD_PASSWORD, MQTT_RC_BAD_USER_NAME_OR_PASSWORD, "user name contains NUL");
        return BROKER_AUTH_REFUSED;
    }
    c->username = tb_strndup((const char *)cn->username.p, cn->username.n);
    if (!srv->passwd)
        return BROKER_AUTH_OK; /* no password file: the user name names the client for the ACL, as Mosquitto does */
    bool slow = throttled(srv, c);
    if (slow && srv->auth.throttle == CFG_THROTTLE_REFUSE) {
        refused(c, METRICS_REFUSE_AUTH_THROTTLED, MQTT_RC_CONNECTION_RATE_EXCEEDED,
                "too many failed authentications from this address (auth.max_failures)");
        return BROKER_AUTH_REFUSED;
    }
    if (srv->partial_bytes + rawlen > srv->cfg->mqtt.max_partial_bytes) {
        broker__conn_give_up(c, METRICS_CLOSE_MEMORY_LIMIT, MQTT_RC_QUOTA_EXCEEDED,
                             "its CONNECT waiting for authentication would pass mqtt.max_partial_bytes");
        return BROKER_AUTH_REFUSED;
    }
    srv->partial_bytes += rawlen;
    broker_auth_req_t *r = tb_calloc(1, sizeof *r);
    r->c = c;
    c->refs++;
    r->pw = auth_passwd_ref(srv->passwd);
    r->packet = tb_malloc(rawlen);
    memcpy(r->packet, raw, rawlen);
    r->packet_len = rawlen;
    /* the views point into our copy: the decoder keeps the packet's layout */
    r->user = r->packet + (cn->username.p - raw);
    r->user_len = cn->username.n;
    r->pass = cn->has_password ? r->packet + (cn->password.p - raw) : (const uint8_t *)"";
    r->pass_len = cn->has_password ? cn->password.n : 0;
    c->auth = r;
    broker__conn_pause(c);
    if (slow) {
        r->delaying = true;
        uv_timer_init(srv->loop, &r->delay);
        r->delay.data = r;
        uv_timer_start(&r->delay, delay_done, srv->auth.throttle_delay_ms, 0);
    } else {
        submit(r);
    }
    return BROKER_AUTH_PENDING;
}

bool broker__acl_may_write(broker_conn_t *c, const uint8_t *topic, size_t tlen)
{
    broker_t *srv = c->srv;
    if (!srv->acl || auth_acl_allows(srv->acl, c->username, c->client_id, (const char *)topic, tlen, AUTH_ACL_WRITE))
        return true;
    srv->publish_denied++;
    if (c->listener)
        c->listener->publish_denied++;
    static tb_ratelimit_t rl = TB_RATELIMIT_INIT(10000);
    uint64_t skipped;
    if (tb_ratelimit(&rl, &skipped))
        tb_warn("PUBLISH denied by auth.acl_file", TB_S("client", c->client_id ? c->client_id : ""),
                TB_S("user", c->username ? c->username : ""), TB_S("peer", broker__conn_peer(c)),
                TB_U("suppressed", skipped));
    return false;
}

void broker_set_auth(broker_t *srv, const cfg_t *cfg, auth_passwd_t *pw, auth_acl_t *acl)
{
    srv->auth = cfg->auth;
    srv->auth.password_file = srv->auth.acl_file = NULL; /* cfg may be a reload's, freed after */
    auth_passwd_unref(srv->passwd);
    auth_acl_unref(srv->acl);
    srv->passwd = pw ? auth_passwd_ref(pw) : NULL;
    srv->acl = acl ? auth_acl_ref(acl) : NULL;
}
