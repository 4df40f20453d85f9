/*
 * rep_chan.c: gRPC channels by URL, and what their connectivity state
 * means for registration and streams.
 *
 * One channel per distinct URL: the cluster's (cluster_url), and each
 * broker a TopicLookup names (usually the same URL, so one channel).
 * Each channel always has a connectivity watch armed on the completion
 * queue, so the thread learns of every state change without polling:
 *   READY              the cluster is reachable: a registration waiting out
 *                      its backoff tries now, and topics waiting in
 *                      CONNECTING open their streams;
 *   TRANSIENT_FAILURE  logged once per outage ("cluster unreachable"); gRPC
 *                      keeps reconnecting by itself, at most every
 *                      GRPC_ARG_MAX_RECONNECT_BACKOFF_MS = 1 s, so recovery
 *                      after an outage takes about a second (GRPC-NOTES.md:
 *                      ~4.8 s with the defaults);
 *   IDLE               a READY channel whose server went away goes IDLE and
 *                      would stay there until a call needs it: it is asked
 *                      to connect again at once.
 * Streams are only opened on a READY channel, so an outage costs no
 * failed stream attempts (and no growing stream backoff): the topics simply
 * wait for READY. Destroying a channel completes its pending watch
 * (checked: the tag returns with the SHUTDOWN state), which is how the
 * thread drains them at stop.
 */
#include "replicator/rep_int.h"

#include <grpc/grpc_security.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_MS (3600 * 1000) /* a watch's deadline; re-armed when it passes */

static grpc_channel *create(rep_t *r, const char *target, bool tls)
{
    grpc_arg args[5];
    memset(args, 0, sizeof args);
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[0].value.integer = 1000;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
    args[1].value.integer = 200;
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS; /* also the shortest connect timeout */
    args[2].value.integer = 5000;
    args[3].type = GRPC_ARG_INTEGER;
    args[3].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH; /* registrations with many schemas */
    args[3].value.integer = 64 << 20;
    args[4].type = GRPC_ARG_STRING;
    args[4].key = GRPC_ARG_PRIMARY_USER_AGENT_STRING;
    args[4].value.string = "tributary/" TRIB_VERSION;
    grpc_channel_args ca = { TB_ARRAY_LEN(args), args };
    grpc_channel_credentials *creds;
    if (tls) {
        grpc_ssl_pem_key_cert_pair pair = { r->tls_key, r->tls_cert };
        creds = grpc_ssl_credentials_create(r->tls_roots, r->tls_key ? &pair : NULL, NULL, NULL);
    } else {
        creds = grpc_insecure_credentials_create();
    }
    grpc_channel *ch = grpc_channel_create(target, creds, &ca);
    grpc_channel_credentials_release(creds);
    return ch;
}

static void watch_cb(rep_t *r, rep__op_t *op, bool ok);

static void watch(rep_t *r, rep__chan_t *c)
{
    c->watching = true;
    r->outstanding++;
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(WATCH_MS, GPR_TIMESPAN));
    grpc_channel_watch_connectivity_state(c->ch, c->state, dl, r->cq, &c->watch_op);
}

static const char *state_name(grpc_connectivity_state s)
{
    switch (s) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "transient_failure";
    case GRPC_CHANNEL_SHUTDOWN: return "shutdown";
    }
    return "?";
}

static void changed(rep_t *r, rep__chan_t *c, grpc_connectivity_state s)
{
    bool cluster = c == r->cluster;
    tb_debug("replicator: channel state", TB_S("url", c->url), TB_S("state", state_name(s)));
    if (s == GRPC_CHANNEL_TRANSIENT_FAILURE && !c->logged_down && !r->stopping) {
        c->logged_down = true;
        tb_warn(cluster ? "cluster unreachable: messages stay in the log; reconnecting (logged once per outage)"
                        : "broker unreachable: reconnecting (logged once per outage)",
                TB_S("url", c->url));
    } else if (s == GRPC_CHANNEL_READY && c->logged_down) {
        c->logged_down = false;
        tb_info(cluster ? "cluster reachable again" : "broker reachable again", TB_S("url", c->url));
    }
    if (cluster) {
        r->st.cluster = s == GRPC_CHANNEL_READY ? REP_CLUSTER_CONNECTED
                        : s == GRPC_CHANNEL_TRANSIENT_FAILURE ? REP_CLUSTER_UNREACHABLE
                                                              : REP_CLUSTER_CONNECTING;
        rep__publish(r);
    }
    if (r->stopping)
        return;
    if (s == GRPC_CHANNEL_IDLE) {
        grpc_channel_check_connectivity_state(c->ch, 1);
        return;
    }
    if (s != GRPC_CHANNEL_READY)
        return;
    if (cluster)
        rep__reg_chan_ready(r);
    for (size_t i = 0; i < r->ntopics; i++) {
        rep__topic_t *t = r->topics[i];
        if (t->wait == c && t->state == REP_TOPIC_CONNECTING)
            rep__topic_chan_ready(r, t);
    }
}

static void watch_cb(rep_t *r, rep__op_t *op, bool ok)
{
    (void)ok; /* false: the deadline passed with no change */
    rep__chan_t *c = TB_CONTAINER_OF(op, rep__chan_t, watch_op);
    r->outstanding--;
    c->watching = false;
    if (!c->ch)
        return; /* destroyed: this was its last watch */
    grpc_connectivity_state s = grpc_channel_check_connectivity_state(c->ch, 0);
    grpc_connectivity_state old = c->state;
    c->state = s;
    watch(r, c);
    if (s != old)
        changed(r, c, s);
}

rep__chan_t *rep__chan_get(rep_t *r, const char *url)
{
    for (rep__chan_t *c = r->chans; c; c = c->next)
        if (strcmp(c->url, url) == 0)
            return c;
    char *target;
    bool tls;
    if (rep__parse_url(url, &target, &tls) < 0) {
        static tb_ratelimit_t rl = TB_RATELIMIT_INIT(60000);
        uint64_t skipped;
        if (tb_ratelimit(&rl, &skipped))
            tb_warn("replicator: the cluster named a URL we cannot use", TB_S("url", url), TB_U("suppressed", skipped));
        return NULL;
    }
    rep__chan_t *c = tb_calloc(1, sizeof *c);
    c->url = tb_strdup(url);
    c->target = target;
    c->tls = tls;
    c->ch = create(r, target, tls);
    c->watch_op.cb = watch_cb;
    c->state = grpc_channel_check_connectivity_state(c->ch, 1);
    c->next = r->chans;
    r->chans = c;
    watch(r, c);
    return c;
}

void rep__chan_connect(rep_t *r, rep__chan_t *c)
{
    (void)r;
    if (!c->ch)
        return;
    grpc_channel_reset_connect_backoff(c->ch);
    grpc_channel_check_connectivity_state(c->ch, 1);
}

void rep__chans_close(rep_t *r)
{
    for (rep__chan_t *c = r->chans; c; c = c->next) {
        if (c->ch) {
            grpc_channel_destroy(c->ch);
            c->ch = NULL;
        }
    }
}

void rep__chans_free(rep_t *r)
{
    rep__chans_close(r);
    for (rep__chan_t *c = r->chans, *next; c; c = next) {
        next = c->next;
        free(c->url);
        free(c->target);
        free(c);
    }
    r->chans = r->cluster = NULL;
}
