/*
 * test_mosq.c: rep_mosq.c, the MQTT output's connection, against a real
 * Mosquitto 2 started by the test on 127.0.0.1 (docs/design/OUTPUTS.md 6.1),
 * with a libmosquitto subscriber recording what arrives and a fake owner
 * handing out N messages over 3 lanes (one remote topic each).
 *
 * The owner checks the interface's promises as it runs: acks come per lane
 * in order and only for what it handed out; after session_lost it rewinds
 * each lane to its last ack + 1 (what the engine's lane will do with its
 * reader at checkpoint + 1). Waits are on conditions with deadlines.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "replicator/rep_mosq_int.h"

#define LANES 3

/* ---- a real Mosquitto ------------------------------------------------------------ */

typedef struct broker {
    char dir[64];
    int port;
    pid_t pid;
    char extra[1024]; /* listener options appended after the listener line */
    char head[512];   /* global options */
} broker_t;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

static bool port_open(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    bool ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static void broker_init(broker_t *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "/tmp/tb-mosq-XXXXXX");
    cr_assert_not_null(mkdtemp(b->dir));
    b->port = free_port();
}

static void broker_start(broker_t *b)
{
    char conf[128], buf[4096];
    snprintf(conf, sizeof conf, "%s/mosquitto.conf", b->dir);
    snprintf(buf, sizeof buf,
             "user root\npersistence true\npersistence_location %s/\nmax_queued_messages 0\n"
             "log_dest file %s/mosquitto.log\nlog_type all\n%s\nlistener %d 127.0.0.1\n%s\n",
             b->dir, b->dir, b->head, b->port, b->extra[0] ? b->extra : "allow_anonymous true");
    FILE *f = fopen(conf, "w");
    cr_assert_not_null(f);
    fputs(buf, f);
    fclose(f);
    b->pid = fork();
    cr_assert_geq(b->pid, 0);
    if (b->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails or times out leaves no broker */
        execl("/usr/sbin/mosquitto", "mosquitto", "-c", conf, (char *)NULL);
        _exit(127);
    }
    uint64_t deadline = tb_mono_ms() + 10000;
    while (!port_open(b->port)) {
        int st;
        cr_assert_eq(waitpid(b->pid, &st, WNOHANG), 0, "mosquitto exited; see %s/mosquitto.log", b->dir);
        cr_assert_lt(tb_mono_ms(), deadline, "mosquitto does not listen on %d", b->port);
        poll(NULL, 0, 10);
    }
}

static void broker_stop(broker_t *b)
{
    if (b->pid <= 0)
        return;
    kill(b->pid, SIGTERM);
    int st;
    waitpid(b->pid, &st, 0);
    b->pid = 0;
}

static void broker_fini(broker_t *b)
{
    broker_stop(b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", b->dir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- the subscriber: records first arrivals per topic ------------------------------ */

typedef struct sub {
    struct mosquitto *m;
    pthread_mutex_t mu;
    uint64_t *seen[LANES];     /* arrivals per lane, in order (duplicates too) */
    size_t n[LANES], cap[LANES];
    atomic_bool subscribed;
} sub_t;

static void sub_on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    (void)m;
    sub_t *s = arg;
    unsigned lane;
    unsigned long long seq;
    char buf[64];
    int n = msg->payloadlen < 63 ? msg->payloadlen : 63;
    memcpy(buf, msg->payload, (size_t)n);
    buf[n] = 0;
    if (sscanf(buf, "%u:%llu", &lane, &seq) != 2 || lane >= LANES)
        return;
    char want[32];
    snprintf(want, sizeof want, "out/t%u", lane);
    if (strcmp(msg->topic, want) != 0)
        return; /* a message on the wrong topic is simply not counted */
    pthread_mutex_lock(&s->mu);
    if (s->n[lane] == s->cap[lane]) {
        s->cap[lane] = s->cap[lane] ? 2 * s->cap[lane] : 1024;
        s->seen[lane] = realloc(s->seen[lane], s->cap[lane] * sizeof(uint64_t));
    }
    s->seen[lane][s->n[lane]++] = seq;
    pthread_mutex_unlock(&s->mu);
}

static void sub_on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *granted)
{
    (void)m;
    (void)mid;
    sub_t *s = arg;
    if (n >= 1 && granted[0] <= 2)
        atomic_store(&s->subscribed, true);
}

static void sub_on_connect(struct mosquitto *m, void *arg, int rc)
{
    (void)arg;
    if (rc == 0)
        mosquitto_subscribe(m, NULL, "out/#", 1);
}

/* A persistent QoS 1 session, so a broker restart keeps what it queued. */
static void sub_start(sub_t *s, int port, const char *cafile)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    mosquitto_lib_init();
    s->m = mosquitto_new("test-recorder", false, s);
    cr_assert_not_null(s->m);
    mosquitto_connect_callback_set(s->m, sub_on_connect);
    mosquitto_subscribe_callback_set(s->m, sub_on_subscribe);
    mosquitto_message_callback_set(s->m, sub_on_message);
    mosquitto_reconnect_delay_set(s->m, 1, 1, false);
    if (cafile)
        cr_assert_eq(mosquitto_tls_set(s->m, cafile, NULL, NULL, NULL, NULL), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_connect(s->m, "127.0.0.1", port, 30), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_loop_start(s->m), MOSQ_ERR_SUCCESS);
    uint64_t deadline = tb_mono_ms() + 10000;
    while (!atomic_load(&s->subscribed)) {
        cr_assert_lt(tb_mono_ms(), deadline, "no SUBACK");
        poll(NULL, 0, 5);
    }
}

static void sub_stop(sub_t *s)
{
    mosquitto_disconnect(s->m);
    mosquitto_loop_stop(s->m, true);
    mosquitto_destroy(s->m);
    for (int i = 0; i < LANES; i++)
        free(s->seen[i]);
    pthread_mutex_destroy(&s->mu);
}

/* How many distinct seqs 1..upto arrived on lane, and whether first arrivals
 * came in order (a resend may repeat an earlier seq: only the first receipt
 * of each is the order a consumer sees). */
static size_t sub_check(sub_t *s, unsigned lane, uint64_t upto, bool *in_order, size_t *dups)
{
    pthread_mutex_lock(&s->mu);
    bool *got = calloc(upto + 1, 1);
    size_t distinct = 0;
    uint64_t last_first = 0;
    *in_order = true;
    *dups = 0;
    for (size_t i = 0; i < s->n[lane]; i++) {
        uint64_t q = s->seen[lane][i];
        if (q == 0 || q > upto)
            continue;
        if (got[q]) {
            (*dups)++;
            continue;
        }
        got[q] = true;
        distinct++;
        if (q < last_first)
            *in_order = false;
        last_first = q;
    }
    free(got);
    pthread_mutex_unlock(&s->mu);
    return distinct;
}

/* ---- the fake owner ------------------------------------------------------------------- */

typedef struct owner {
    uint64_t n;                    /* messages per lane: tokens 1..n */
    atomic_uint_fast64_t limit;    /* hand out tokens <= limit */
    uint64_t cursor[LANES];        /* next token to hand out (conn thread only) */
    atomic_uint_fast64_t acked[LANES];
    atomic_uint_fast64_t lost;     /* session_lost calls */
    atomic_uint_fast64_t violations; /* an ack out of order or of a token never handed out */
    unsigned rr;
    char payload[64];
} owner_t;

static int own_next(void *arg, rep_mosq_msg_t *msg)
{
    owner_t *o = arg;
    for (unsigned k = 0; k < LANES; k++) {
        unsigned lane = (o->rr + k) % LANES;
        uint64_t tok = o->cursor[lane];
        if (tok > o->n || tok > atomic_load(&o->limit))
            continue;
        o->cursor[lane]++;
        o->rr = lane + 1;
        static char topics[LANES][16];
        snprintf(topics[lane], sizeof topics[lane], "out/t%u", lane);
        int len = snprintf(o->payload, sizeof o->payload, "%u:%llu", lane, (unsigned long long)tok);
        *msg = (rep_mosq_msg_t){ .lane = lane, .token = tok, .topic = topics[lane], .payload = o->payload,
                                 .payload_len = (size_t)len };
        return 1;
    }
    return 0;
}

static void own_acked(void *arg, uint32_t lane, uint64_t token)
{
    owner_t *o = arg;
    if (lane >= LANES || token <= atomic_load(&o->acked[lane]) || token >= o->cursor[lane])
        atomic_fetch_add(&o->violations, 1);
    else
        atomic_store(&o->acked[lane], token);
}

static void own_lost(void *arg)
{
    owner_t *o = arg;
    atomic_fetch_add(&o->lost, 1);
    for (unsigned i = 0; i < LANES; i++)
        o->cursor[i] = atomic_load(&o->acked[i]) + 1;
}

static const rep_mosq_owner_ops_t own_ops = { .next = own_next, .acked = own_acked, .session_lost = own_lost };

static void owner_init(owner_t *o, uint64_t n)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    atomic_store(&o->limit, n);
    for (unsigned i = 0; i < LANES; i++)
        o->cursor[i] = 1;
}

static uint64_t owner_min_acked(owner_t *o)
{
    uint64_t m = UINT64_MAX;
    for (unsigned i = 0; i < LANES; i++)
        m = TB_MIN(m, (uint64_t)atomic_load(&o->acked[i]));
    return m;
}

static void wait_acked(owner_t *o, uint64_t upto, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (owner_min_acked(o) < upto) {
        cr_assert_lt(tb_mono_ms(), deadline, "acked %llu of %llu in %u ms",
                     (unsigned long long)owner_min_acked(o), (unsigned long long)upto, ms);
        poll(NULL, 0, 5);
    }
}

static void wait_arrived(sub_t *s, uint64_t upto, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    for (unsigned lane = 0; lane < LANES; lane++) {
        bool ord;
        size_t dups;
        while (sub_check(s, lane, upto, &ord, &dups) < upto) {
            cr_assert_lt(tb_mono_ms(), deadline, "lane %u: %zu of %llu arrived", lane,
                         sub_check(s, lane, upto, &ord, &dups), (unsigned long long)upto);
            poll(NULL, 0, 5);
        }
    }
}

static rep_mosq_state_t state_of(rep_mosq_t *c, rep_mosq_stats_t *st)
{
    rep__mosq_stats(c, st);
    return st->state;
}

static void wait_state(rep_mosq_t *c, rep_mosq_state_t want, uint32_t ms)
{
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + ms;
    while (state_of(c, &st) != want) {
        cr_assert_lt(tb_mono_ms(), deadline, "state %s, not %s (last_error: %s)", rep__mosq_state_name(st.state),
                     rep__mosq_state_name(want), st.last_error);
        poll(NULL, 0, 5);
    }
}

static rep_mosq_t *connect_to(const rep_mosq_opts_t *o, owner_t *own)
{
    rep_mosq_t *c = NULL;
    char err[256];
    cr_assert_eq(rep__mosq_new(o, LANES, &own_ops, own, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rep__mosq_start(c), 0);
    return c;
}

static void opts_for(rep_mosq_opts_t *o, int port, const char *id)
{
    rep__mosq_opts_default(o);
    o->host = "127.0.0.1";
    o->port = port;
    o->client_id = id;
    o->max_inflight = 20;
    o->retry_initial_ms = 50;
    o->retry_max_ms = 400;
}

static void check_all_arrived(sub_t *s, uint64_t n, size_t *dups_total)
{
    *dups_total = 0;
    for (unsigned lane = 0; lane < LANES; lane++) {
        bool ord;
        size_t dups;
        cr_assert_eq(sub_check(s, lane, n, &ord, &dups), n, "lane %u", lane);
        cr_assert(ord, "lane %u: first arrivals out of order", lane);
        *dups_total += dups;
    }
}

/* ---- the tests --------------------------------------------------------------------------- */

/* A plain broker, a subscriber on it, an owner of n messages and options for client_id. */
static void start_plain(broker_t *b, sub_t *s, owner_t *own, uint64_t n, rep_mosq_opts_t *o, const char *client_id)
{
    broker_init(b);
    broker_start(b);
    sub_start(s, b->port, NULL);
    owner_init(own, n);
    opts_for(o, b->port, client_id);
}

static void run_all_arrive(int protocol, int qos)
{
    broker_t b;
    sub_t s;
    owner_t own;
    rep_mosq_opts_t o;
    start_plain(&b, &s, &own, 500, &o, "tb-test-out");
    o.protocol = protocol;
    o.qos = qos;
    o.clean_session = qos == 2;
    rep_mosq_t *c = connect_to(&o, &own);
    wait_acked(&own, 500, 30000);
    wait_arrived(&s, 500, 30000);
    rep_mosq_stats_t st;
    rep__mosq_stats(c, &st);
    cr_assert_eq(st.state, REP_MOSQ_UP);
    cr_assert_eq(st.sessions, 1, "%s", st.last_error);
    cr_assert_eq(st.acked, 3 * 500);
    cr_assert_eq(st.inflight, 0);
    cr_assert_eq(atomic_load(&own.violations), 0);
    size_t dups;
    check_all_arrived(&s, 500, &dups);
    cr_assert_eq(dups, 0, "one session, nothing resent: exactly once");
    rep__mosq_free(c);
    sub_stop(&s);
    broker_fini(&b);
}

Test(mosq, qos1_v5_all_arrive_in_order_per_topic, .timeout = 90)
{
    run_all_arrive(5, 1);
}

Test(mosq, qos2_v311_all_arrive_in_order_per_topic, .timeout = 90)
{
    run_all_arrive(4, 2);
}

/* QoS 0 is confirmed by the UNSUBACK of a filter never subscribed. */
Test(mosq, qos0_confirmed_by_unsuback, .timeout = 90)
{
    run_all_arrive(5, 0);
}

Test(mosq, remote_restart_resends_unacked_in_order, .timeout = 120)
{
    broker_t b;
    sub_t s;
    owner_t own;
    const uint64_t n = 3000;
    rep_mosq_opts_t o;
    start_plain(&b, &s, &own, n, &o, "tb-test-restart");
    atomic_store(&own.limit, n / 3);
    o.max_inflight = 50;
    rep_mosq_t *c = connect_to(&o, &own);
    wait_acked(&own, n / 3, 30000);
    /* let the rest flow and stop the remote under it */
    atomic_store(&own.limit, n);
    rep__mosq_kick(c);
    broker_stop(&b);
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + 10000;
    while (state_of(c, &st) == REP_MOSQ_UP) {
        cr_assert_lt(tb_mono_ms(), deadline, "the loss is not noticed");
        poll(NULL, 0, 5);
    }
    uint64_t acked_before = owner_min_acked(&own);
    broker_start(&b);
    wait_acked(&own, n, 60000);
    wait_arrived(&s, n, 60000);
    rep__mosq_stats(c, &st);
    cr_assert_geq(st.sessions, 2);
    cr_assert_geq(st.failures, 1);
    cr_assert_geq(atomic_load(&own.lost), 1, "session_lost was called");
    cr_assert_eq(atomic_load(&own.violations), 0);
    size_t dups;
    check_all_arrived(&s, n, &dups);
    cr_log_info("restart: acked %llu before the stop, %zu duplicates, %llu resent", (unsigned long long)acked_before,
                dups, (unsigned long long)st.unsent_lost);
    rep__mosq_free(c);
    sub_stop(&s);
    broker_fini(&b);
}

/* The fewest attempts backoff allows within ms: delays of equal jitter are
 * at least cap/2, cap doubling from initial to max. */
static uint64_t max_attempts_within(uint64_t ms, uint32_t initial, uint32_t max)
{
    uint64_t t = 0, n = 1, cap = initial;
    for (;;) {
        t += cap / 2;
        if (t > ms)
            return n;
        n++;
        cap = TB_MIN(cap * 2, (uint64_t)max);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(mosq, wrong_password_is_refused_with_backoff, .timeout = 90)
{
    broker_t b;
    broker_init(&b);
    char cmd[512], pw[128], wrong[128], right[128];
    snprintf(pw, sizeof pw, "%s/passwd", b.dir);
    snprintf(cmd, sizeof cmd, "mosquitto_passwd -b -c %s edge1 s3cret-pass >/dev/null 2>&1", pw);
    cr_assert_eq(system(cmd), 0);
    snprintf(b.extra, sizeof b.extra, "allow_anonymous false\npassword_file %s", pw);
    broker_start(&b);
    snprintf(wrong, sizeof wrong, "%s/wrong.pw", b.dir);
    write_file(wrong, "not-the-password\n");
    snprintf(right, sizeof right, "%s/right.pw", b.dir);
    write_file(right, "s3cret-pass\n");

    owner_t own;
    owner_init(&own, 10);
    rep_mosq_opts_t o;
    opts_for(&o, b.port, "tb-test-pw");
    o.username = "edge1";
    o.password_file = wrong;
    uint64_t t0 = tb_mono_ms();
    rep_mosq_t *c = connect_to(&o, &own);
    rep_mosq_stats_t st;
    uint64_t deadline = t0 + 20000;
    while (rep__mosq_stats(c, &st), st.refusals < 4) {
        cr_assert_lt(tb_mono_ms(), deadline, "refusals %llu (%s)", (unsigned long long)st.refusals, st.last_error);
        poll(NULL, 0, 5);
    }
    uint64_t elapsed = tb_mono_ms() - t0;
    rep__mosq_stats(c, &st);
    cr_assert(st.state == REP_MOSQ_REFUSED || st.state == REP_MOSQ_CONNECTING, "%s",
              rep__mosq_state_name(st.state));
    cr_assert_eq(st.sessions, 0);
    cr_assert_not_null(strstr(st.last_error, "CONNACK"), "%s", st.last_error);
    cr_assert_null(strstr(st.last_error, "not-the-password"));
    cr_assert_leq(st.attempts, max_attempts_within(elapsed, o.retry_initial_ms, o.retry_max_ms),
                  "%llu attempts in %llu ms: backoff not held", (unsigned long long)st.attempts,
                  (unsigned long long)elapsed);
    cr_assert_eq(atomic_load(&own.acked[0]), 0);
    rep__mosq_free(c);

    /* the right one connects and delivers */
    owner_init(&own, 10);
    o.password_file = right;
    c = connect_to(&o, &own);
    wait_acked(&own, 10, 20000);
    rep__mosq_stats(c, &st);
    cr_assert_eq(st.refusals, 0);
    rep__mosq_free(c);
    broker_fini(&b);
}

Test(mosq, missing_password_file_is_a_config_error)
{
    owner_t own;
    owner_init(&own, 1);
    rep_mosq_opts_t o;
    opts_for(&o, 1883, "x");
    o.password_file = "/nonexistent/pw";
    rep_mosq_t *c = (rep_mosq_t *)&own;
    char err[256];
    cr_assert_lt(rep__mosq_new(&o, LANES, &own_ops, &own, &c, err, sizeof err), 0);
    cr_assert_null(c);
    cr_assert_not_null(strstr(err, "/nonexistent/pw"), "%s", err);
    o.password_file = NULL;
    o.qos = 2;
    o.clean_session = false;
    cr_assert_eq(rep__mosq_new(&o, LANES, &own_ops, &own, &c, err, sizeof err), TB_ECONFIG);
    cr_assert_not_null(strstr(err, "qos 2"), "%s", err);
}

/* A silent remote: SIGSTOP the broker (the socket stays open, nothing
 * answers); the ack deadline ends the session, and after SIGCONT the
 * output reconnects and everything arrives. */
Test(mosq, silent_remote_hits_the_ack_deadline, .timeout = 90)
{
    broker_t b;
    sub_t s;
    owner_t own;
    rep_mosq_opts_t o;
    start_plain(&b, &s, &own, 200, &o, "tb-test-silent");
    atomic_store(&own.limit, 100);
    o.ack_timeout_ms = 1500;
    o.connect_timeout_ms = 1500;
    rep_mosq_t *c = connect_to(&o, &own);
    wait_acked(&own, 100, 30000);
    kill(b.pid, SIGSTOP);
    atomic_store(&own.limit, 200);
    rep__mosq_kick(c);
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + 15000;
    while (rep__mosq_stats(c, &st), st.failures < 1) {
        cr_assert_lt(tb_mono_ms(), deadline, "a silent remote is not noticed (state %s)",
                     rep__mosq_state_name(st.state));
        poll(NULL, 0, 10);
    }
    cr_assert_not_null(strstr(st.last_error, "no ack within"), "%s", st.last_error);
    kill(b.pid, SIGCONT);
    wait_acked(&own, 200, 60000);
    wait_arrived(&s, 200, 60000);
    cr_assert_eq(atomic_load(&own.violations), 0);
    rep__mosq_free(c);
    sub_stop(&s);
    broker_fini(&b);
}

/* ---- TLS ----------------------------------------------------------------------------------- */

static void make_ca(const char *dir, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s.key -out %s.pem -days 2 -subj /CN=%s >/dev/null 2>&1",
             dir, name, name, name);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void make_server_cert(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext.cnf && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key "
             "-out srv.csr -subj /CN=localhost >/dev/null 2>&1 && "
             "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem "
             "-days 2 -extfile ext.cnf >/dev/null 2>&1",
             dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* b serves TLS only, with a server certificate for localhost/127.0.0.1 from
 * a new CA (<dir>/ca.pem), anonymous clients allowed. */
static void serve_tls(broker_t *b)
{
    make_ca(b->dir, "ca");
    make_server_cert(b->dir);
    snprintf(b->extra, sizeof b->extra, "allow_anonymous true\ncafile %s/ca.pem\ncertfile %s/srv.pem\nkeyfile %s/srv.key",
             b->dir, b->dir, b->dir);
}

Test(mosq, tls_verifies_and_a_wrong_ca_is_refused, .timeout = 90)
{
    broker_t b;
    broker_init(&b);
    make_ca(b.dir, "other");
    serve_tls(&b);
    broker_start(&b);
    char ca[128], other[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", b.dir);
    snprintf(other, sizeof other, "%s/other.pem", b.dir);
    sub_t s;
    sub_start(&s, b.port, ca);

    owner_t own;
    owner_init(&own, 50);
    rep_mosq_opts_t o;
    opts_for(&o, b.port, "tb-test-tls");
    o.tls = true;
    o.ca_file = ca;
    rep_mosq_t *c = connect_to(&o, &own);
    wait_state(c, REP_MOSQ_UP, 20000);
    wait_acked(&own, 50, 30000);
    wait_arrived(&s, 50, 30000);
    rep_mosq_stats_t st;
    rep__mosq_stats(c, &st);
    cr_assert_eq(st.sessions, 1, "%s", st.last_error);
    rep__mosq_free(c);

    /* a CA that did not sign the server: the handshake is refused, reported, never "up" */
    owner_init(&own, 50);
    o.ca_file = other;
    o.client_id = "tb-test-tls-wrong";
    c = connect_to(&o, &own);
    uint64_t deadline = tb_mono_ms() + 20000;
    while (rep__mosq_stats(c, &st), st.failures < 2) {
        cr_assert_lt(tb_mono_ms(), deadline, "failures %llu", (unsigned long long)st.failures);
        cr_assert_neq(st.state, REP_MOSQ_UP, "connected through a CA that did not sign the server");
        poll(NULL, 0, 5);
    }
    cr_assert_eq(st.sessions, 0);
    cr_assert_eq(atomic_load(&own.acked[0]), 0);
    cr_assert_not_null(strstr(st.last_error, "certificate verify failed"), "%s", st.last_error);
    rep__mosq_free(c);
    sub_stop(&s);
    broker_fini(&b);
}

/* ---- a TCP connect that does not complete at once ----------------------------------------
 *
 * On 127.0.0.1 a connect completes inside connect(), so the tests above never
 * see libmosquitto's pending-connect path, which a remote broker takes. A
 * listener with a full accept queue drops the SYN (the client retransmits it
 * a second later): connect() returns EINPROGRESS. The gate listens with
 * backlog 0, is filled by one dummy connection, and is released (the dummy
 * accepted and closed) once the output has been connecting for a while; then
 * it forwards bytes to the broker. */

typedef struct gate {
    int lfd, port, target, dummy;
    atomic_bool released, stop;
    pthread_t thread;
} gate_t;

static int tcp_to(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static bool pump_bytes(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return false;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static void *gate_main(void *arg)
{
    gate_t *g = arg;
    int a = -1, b = -1;
    while (!atomic_load(&g->stop)) {
        if (!atomic_load(&g->released)) {
            poll(NULL, 0, 5);
            continue;
        }
        if (g->dummy >= 0) {
            int d = accept(g->lfd, NULL, NULL); /* the dummy, first in the queue */
            if (d >= 0)
                close(d);
            close(g->dummy);
            g->dummy = -1;
        }
        struct pollfd p[3] = { { .fd = g->lfd, .events = POLLIN }, { .fd = a, .events = POLLIN },
                               { .fd = b, .events = POLLIN } };
        if (poll(p, 3, 50) <= 0)
            continue;
        if ((p[0].revents & POLLIN) && a < 0) {
            a = accept(g->lfd, NULL, NULL);
            b = a >= 0 ? tcp_to(g->target) : -1;
        }
        if (a >= 0 && b >= 0 && (((p[1].revents & (POLLIN | POLLHUP)) && !pump_bytes(a, b)) ||
                                 ((p[2].revents & (POLLIN | POLLHUP)) && !pump_bytes(b, a)))) {
            close(a);
            close(b);
            a = b = -1;
        }
    }
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    return NULL;
}

static void gate_open(gate_t *g, int target)
{
    memset(g, 0, sizeof *g);
    g->target = target;
    g->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    cr_assert_eq(bind(g->lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(g->lfd, 0), 0);
    socklen_t l = sizeof a;
    getsockname(g->lfd, (struct sockaddr *)&a, &l);
    g->port = ntohs(a.sin_port);
    g->dummy = tcp_to(g->port); /* fills the accept queue */
    cr_assert_geq(g->dummy, 0);
    cr_assert_eq(pthread_create(&g->thread, NULL, gate_main, g), 0);
}

static void gate_close(gate_t *g)
{
    atomic_store(&g->stop, true);
    pthread_join(g->thread, NULL);
    if (g->dummy >= 0)
        close(g->dummy);
    close(g->lfd);
}

static void run_pending(bool tls)
{
    broker_t b;
    broker_init(&b);
    if (tls) {
        serve_tls(&b);
    }
    broker_start(&b);
    char ca[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", b.dir);
    gate_t g;
    gate_open(&g, b.port);
    owner_t own;
    owner_init(&own, 20);
    rep_mosq_opts_t o;
    opts_for(&o, g.port, "tb-test-pending");
    o.tls = tls;
    o.ca_file = ca;
    rep_mosq_t *c = connect_to(&o, &own);
    /* connecting, and still so a while later: the SYN waits in the kernel */
    uint64_t t0 = tb_mono_ms();
    rep_mosq_stats_t st;
    while (tb_mono_ms() - t0 < 300) {
        rep__mosq_stats(c, &st);
        cr_assert_eq(st.failures, 0, "%s", st.last_error);
        cr_assert_neq(st.state, REP_MOSQ_UP, "connected through a full accept queue: the test proves nothing");
        poll(NULL, 0, 10);
    }
    atomic_store(&g.released, true);
    wait_state(c, REP_MOSQ_UP, 20000);
    wait_acked(&own, 20, 20000);
    rep__mosq_stats(c, &st);
    cr_assert_eq(st.attempts, 1, "the first attempt's pending connect completed (%s)", st.last_error);
    rep__mosq_free(c);
    gate_close(&g);
    broker_fini(&b);
}

Test(mosq, tcp_after_a_pending_connect, .timeout = 90)
{
    run_pending(false);
}

Test(mosq, tls_after_a_pending_tcp_connect, .timeout = 90)
{
    run_pending(true);
}

/* A client certificate against require_certificate: with it the output
 * connects, without it the handshake fails. */
Test(mosq, tls_client_certificate, .timeout = 90)
{
    broker_t b;
    broker_init(&b);
    make_ca(b.dir, "ca");
    make_server_cert(b.dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout cli.key "
             "-out cli.csr -subj /CN=edge1 >/dev/null 2>&1 && "
             "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2 "
             ">/dev/null 2>&1",
             b.dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(b.extra, sizeof b.extra,
             "allow_anonymous true\ncafile %s/ca.pem\ncertfile %s/srv.pem\nkeyfile %s/srv.key\n"
             "require_certificate true",
             b.dir, b.dir, b.dir);
    broker_start(&b);
    char ca[128], cert[128], key[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", b.dir);
    snprintf(cert, sizeof cert, "%s/cli.pem", b.dir);
    snprintf(key, sizeof key, "%s/cli.key", b.dir);

    owner_t own;
    owner_init(&own, 10);
    rep_mosq_opts_t o;
    opts_for(&o, b.port, "tb-test-mtls");
    o.tls = true;
    o.ca_file = ca;
    rep_mosq_t *c = connect_to(&o, &own); /* no client certificate */
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + 20000;
    while (rep__mosq_stats(c, &st), st.failures < 2) {
        cr_assert_lt(tb_mono_ms(), deadline, "failures %llu", (unsigned long long)st.failures);
        cr_assert_neq(st.state, REP_MOSQ_UP, "connected without the certificate the broker requires");
        poll(NULL, 0, 5);
    }
    cr_assert_eq(atomic_load(&own.acked[0]), 0);
    rep__mosq_free(c);

    owner_init(&own, 10);
    o.cert_file = cert;
    o.key_file = key;
    c = connect_to(&o, &own);
    wait_state(c, REP_MOSQ_UP, 20000);
    wait_acked(&own, 10, 20000);
    rep__mosq_free(c);
    broker_fini(&b);
}

/* ---- the session hooks (Sparkplug, S4): will, subscriptions, incoming ------------------- */

/* A second client that records every message on spb/# as "topic payload". */
typedef struct spy {
    struct mosquitto *m;
    pthread_mutex_t mu;
    char lines[64][160];
    atomic_int n;
    atomic_bool subscribed;
} spy_t;

static void spy_on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    (void)m;
    spy_t *s = arg;
    pthread_mutex_lock(&s->mu);
    int i = atomic_load(&s->n);
    if (i < 64) {
        snprintf(s->lines[i], sizeof s->lines[i], "%s %.*s", msg->topic, msg->payloadlen, (const char *)msg->payload);
        atomic_store(&s->n, i + 1);
    }
    pthread_mutex_unlock(&s->mu);
}

static void spy_on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *granted)
{
    (void)m;
    (void)mid;
    if (n >= 1 && granted[0] <= 2)
        atomic_store(&((spy_t *)arg)->subscribed, true);
}

static void spy_start(spy_t *s, int port)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    mosquitto_lib_init();
    s->m = mosquitto_new("test-spy", true, s);
    cr_assert_not_null(s->m);
    mosquitto_subscribe_callback_set(s->m, spy_on_subscribe);
    mosquitto_message_callback_set(s->m, spy_on_message);
    cr_assert_eq(mosquitto_connect(s->m, "127.0.0.1", port, 30), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_subscribe(s->m, NULL, "spb/#", 1), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_loop_start(s->m), MOSQ_ERR_SUCCESS);
    uint64_t deadline = tb_mono_ms() + 10000;
    while (!atomic_load(&s->subscribed)) {
        cr_assert_lt(tb_mono_ms(), deadline, "spy: no SUBACK");
        poll(NULL, 0, 5);
    }
}

static bool spy_has(spy_t *s, const char *line)
{
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (int i = 0; i < atomic_load(&s->n) && !found; i++)
        found = strcmp(s->lines[i], line) == 0;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static void spy_wait(spy_t *s, const char *line, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (!spy_has(s, line)) {
        cr_assert_lt(tb_mono_ms(), deadline, "spy: no \"%s\" within %u ms (%d seen)", line, ms, atomic_load(&s->n));
        poll(NULL, 0, 5);
    }
}

static void spy_stop(spy_t *s)
{
    mosquitto_disconnect(s->m);
    mosquitto_loop_stop(s->m, true);
    mosquitto_destroy(s->m);
    pthread_mutex_destroy(&s->mu);
}

/* The session's owner: hands out `n` messages on lane 0 once subscribed. */
typedef struct sess {
    uint64_t n, cursor;
    atomic_uint_fast64_t acked;
    atomic_uint_fast64_t attempts;    /* the last attempt number seen */
    atomic_int granted, refused_reason;
    atomic_int next_early;            /* next() before the SUBACK */
    atomic_int incoming;
    char refused_topic[64], will[32], in_last[64];
    char payload[32];
} sess_t;

static int sess_next(void *arg, rep_mosq_msg_t *msg)
{
    sess_t *s = arg;
    if (!atomic_load(&s->granted)) {
        atomic_fetch_add(&s->next_early, 1);
        return 0;
    }
    if (s->cursor > s->n)
        return 0;
    int len = snprintf(s->payload, sizeof s->payload, "0:%llu", (unsigned long long)s->cursor);
    *msg = (rep_mosq_msg_t){ .lane = 0, .token = s->cursor++, .topic = "out/t0", .payload = s->payload,
                             .payload_len = (size_t)len };
    return 1;
}

static void sess_acked(void *arg, uint32_t lane, uint64_t token)
{
    (void)lane;
    atomic_store(&((sess_t *)arg)->acked, token);
}

static void sess_lost(void *arg)
{
    sess_t *s = arg;
    s->cursor = atomic_load(&s->acked) + 1;
    atomic_store(&s->granted, 0);
}

static void sess_connecting(void *arg, uint64_t attempt, rep_mosq_will_t *will)
{
    sess_t *s = arg;
    atomic_store(&s->attempts, attempt);
    int len = snprintf(s->will, sizeof s->will, "will-%llu", (unsigned long long)attempt);
    *will = (rep_mosq_will_t){ .topic = "spb/will", .payload = s->will, .payload_len = (size_t)len };
}

static void sess_subscribed(void *arg, const char *topic, int reason)
{
    sess_t *s = arg;
    if (topic) {
        snprintf(s->refused_topic, sizeof s->refused_topic, "%s", topic);
        atomic_store(&s->refused_reason, reason);
    } else {
        atomic_store(&s->granted, 1);
    }
}

static void sess_message(void *arg, const char *topic, const void *payload, size_t len, bool retained)
{
    (void)retained;
    sess_t *s = arg;
    snprintf(s->in_last, sizeof s->in_last, "%s %.*s", topic, (int)len, (const char *)payload);
    atomic_fetch_add(&s->incoming, 1);
}

static const rep_mosq_owner_ops_t sess_ops = { sess_next, sess_acked, sess_lost, NULL };
static const rep_mosq_session_ops_t sess_hooks = { sess_connecting, sess_subscribed, sess_message };

static rep_mosq_t *sess_connect(rep_mosq_opts_t *o, sess_t *s)
{
    static const char *const subs[] = { "spb/cmd", "spb/other" };
    o->subscribe = subs;
    o->nsubscribe = 2;
    rep_mosq_t *c = NULL;
    char err[256];
    cr_assert_eq(rep__mosq_new(o, 1, &sess_ops, s, &c, err, sizeof err), 0, "%s", err);
    rep__mosq_set_session_ops(c, &sess_hooks);
    cr_assert_eq(rep__mosq_start(c), 0);
    return c;
}

static void wait_flag(atomic_int *f, const char *what, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (!atomic_load(f)) {
        cr_assert_lt(tb_mono_ms(), deadline, "%s: not within %u ms", what, ms);
        poll(NULL, 0, 5);
    }
}

static void sess_wait_acked(sess_t *s, uint64_t upto, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (atomic_load(&s->acked) < upto) {
        cr_assert_lt(tb_mono_ms(), deadline, "acked %llu of %llu", (unsigned long long)atomic_load(&s->acked),
                     (unsigned long long)upto);
        poll(NULL, 0, 5);
    }
}

/* The will is set per attempt (its number in it), nothing is handed out
 * before the SUBACK, an incoming PUBLISH reaches the owner, the will is
 * published when the connection dies without DISCONNECT, and a farewell is
 * published at QoS 1 and followed by DISCONNECT: no will then. */
Test(mosq, session_will_subscribe_incoming_farewell, .timeout = 90)
{
    broker_t b;
    broker_init(&b);
    broker_start(&b);
    spy_t spy;
    spy_start(&spy, b.port);
    sess_t s = { .n = 5, .cursor = 1 };
    rep_mosq_opts_t o;
    opts_for(&o, b.port, "tb-test-sess");
    o.qos = 0;
    o.clean_session = true;
    rep_mosq_t *c = sess_connect(&o, &s);
    wait_flag(&s.granted, "SUBACK", 20000);
    sess_wait_acked(&s, 5, 20000);
    cr_assert_eq(atomic_load(&s.attempts), 1);
    cr_assert_eq(atomic_load(&s.next_early), 0, "next() was called before the SUBACK");
    cr_assert_eq(mosquitto_publish(spy.m, NULL, "spb/cmd", 7, "rebirth", 1, false), MOSQ_ERR_SUCCESS);
    wait_flag(&s.incoming, "incoming message", 20000);
    cr_assert_str_eq(s.in_last, "spb/cmd rebirth");

    /* killed: no DISCONNECT, the broker publishes this attempt's will */
    rep__mosq_free(c);
    spy_wait(&spy, "spb/will will-1", 20000);

    /* a remote restart: a new attempt, a new will */
    memset(&s, 0, sizeof s);
    s.n = 3;
    s.cursor = 1;
    c = sess_connect(&o, &s);
    wait_flag(&s.granted, "SUBACK", 20000);
    broker_stop(&b);
    broker_start(&b);
    uint64_t deadline = tb_mono_ms() + 20000;
    while (atomic_load(&s.attempts) < 2 || !atomic_load(&s.granted)) {
        cr_assert_lt(tb_mono_ms(), deadline, "no second session (attempt %llu)",
                     (unsigned long long)atomic_load(&s.attempts));
        poll(NULL, 0, 5);
    }
    sess_wait_acked(&s, 3, 20000);
    spy_stop(&spy);
    spy_start(&spy, b.port); /* the restart dropped the spy */

    /* the farewell: published, acked, DISCONNECT; the will is not published */
    rep__mosq_farewell(c, "spb/death", "bye", 3, 5000, true);
    spy_wait(&spy, "spb/death bye", 20000);
    cr_assert_eq(mosquitto_publish(spy.m, NULL, "spb/marker", 4, "mark", 1, false), MOSQ_ERR_SUCCESS);
    spy_wait(&spy, "spb/marker mark", 20000);
    char will[64];
    snprintf(will, sizeof will, "spb/will will-%llu", (unsigned long long)atomic_load(&s.attempts));
    cr_assert(!spy_has(&spy, will), "the will was published after a DISCONNECT");
    rep_mosq_stats_t st;
    rep__mosq_stats(c, &st);
    cr_assert_eq(st.state, REP_MOSQ_STOPPED, "%s", rep__mosq_state_name(st.state));
    rep__mosq_free(c);
    spy_stop(&spy);
    broker_fini(&b);
}

/* A subscription the broker's ACL refuses: reported to the owner with its
 * reason, nothing handed out on that session, state refused, retried.
 * Mosquitto 2.0.11's acl_file never refuses a SUBSCRIBE (it filters at
 * delivery), so the refusal comes from its dynamic security plugin's
 * subscribeLiteral deny (SUBACK 0x87, 0x80 in 3.1.1). */
Test(mosq, session_suback_refused_by_acl, .timeout = 90)
{
    broker_t b;
    broker_init(&b);
    char acl[128];
    snprintf(acl, sizeof acl, "%s/dynsec.json", b.dir);
    write_file(acl, "{\"defaultACLAccess\":{\"publishClientSend\":true,\"publishClientReceive\":true,"
                    "\"subscribe\":true,\"unsubscribe\":true},\"clients\":[],"
                    "\"groups\":[{\"groupname\":\"anon\",\"roles\":[{\"rolename\":\"r\"}]}],"
                    "\"roles\":[{\"rolename\":\"r\",\"acls\":[{\"acltype\":\"subscribeLiteral\","
                    "\"topic\":\"spb/cmd\",\"priority\":0,\"allow\":false}]}],\"anonymousGroup\":\"anon\"}\n");
    snprintf(b.head, sizeof b.head,
             "per_listener_settings false\nallow_anonymous true\n"
             "plugin /usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so\nplugin_opt_config_file %s", acl);
    broker_start(&b);
    sess_t s = { .n = 5, .cursor = 1 };
    rep_mosq_opts_t o;
    opts_for(&o, b.port, "tb-test-acl");
    o.qos = 1;
    o.clean_session = true;
    rep_mosq_t *c = sess_connect(&o, &s);
    wait_flag(&s.refused_reason, "a refused SUBACK", 20000);
    cr_assert_str_eq(s.refused_topic, "spb/cmd");
    cr_assert_geq(atomic_load(&s.refused_reason), 0x80);
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + 20000;
    while (rep__mosq_stats(c, &st), st.refusals < 2) {
        cr_assert_lt(tb_mono_ms(), deadline, "refusals %llu (%s)", (unsigned long long)st.refusals, st.last_error);
        poll(NULL, 0, 5);
    }
    cr_assert_not_null(strstr(st.last_error, "SUBACK refused spb/cmd"), "%s", st.last_error);
    cr_assert_eq(atomic_load(&s.granted), 0);
    cr_assert_eq(st.sent, 0, "published on a session whose subscription was refused");
    cr_assert_eq(atomic_load(&s.acked), 0);
    rep__mosq_free(c);
    broker_fini(&b);
}

/* ---- a Sparkplug session (rep_spb.c) on this connection, end to end ---------------------- */

#include "proto/sparkplug_b.pb-c.h"
#include "replicator/rep_spb.h"

/* A proxy that can cut the line silently: while cut, every connection it
 * holds (and any accepted meanwhile) has its bytes read and dropped both
 * ways, nothing closed, as a pulled cable does; after, new connections pass. */
#define CUT_MAX 32
typedef struct cutter {
    int lfd, port, target;
    int a[CUT_MAX], b[CUT_MAX];
    bool dead[CUT_MAX];
    atomic_bool cut, stop;
    pthread_t thread;
} cutter_t;

static void *cutter_main(void *arg)
{
    cutter_t *g = arg;
    while (!atomic_load(&g->stop)) {
        struct pollfd p[1 + 2 * CUT_MAX];
        p[0] = (struct pollfd){ .fd = g->lfd, .events = POLLIN };
        for (int i = 0; i < CUT_MAX; i++) {
            p[1 + 2 * i] = (struct pollfd){ .fd = g->a[i], .events = POLLIN };
            p[2 + 2 * i] = (struct pollfd){ .fd = g->b[i], .events = POLLIN };
        }
        if (poll(p, 1 + 2 * CUT_MAX, 20) <= 0)
            continue;
        bool cut = atomic_load(&g->cut);
        if (p[0].revents & POLLIN) {
            int a = accept(g->lfd, NULL, NULL);
            for (int i = 0; a >= 0 && i < CUT_MAX; i++)
                if (g->a[i] < 0) {
                    g->a[i] = a;
                    g->b[i] = cut ? -1 : tcp_to(g->target);
                    g->dead[i] = cut;
                    a = -1;
                }
            if (a >= 0)
                close(a);
        }
        for (int i = 0; i < CUT_MAX; i++) {
            if (g->a[i] < 0)
                continue;
            if (cut)
                g->dead[i] = true; /* a connection once cut never carries a byte again */
            for (int side = 0; side < 2; side++) {
                short rev = p[1 + 2 * i + side].revents;
                int from = side ? g->b[i] : g->a[i], to = side ? g->a[i] : g->b[i];
                if (from < 0 || !(rev & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                char buf[16384];
                if (g->dead[i]) {
                    if (read(from, buf, sizeof buf) <= 0) { /* the owner gave up: let it go */
                        close(g->a[i]);
                        if (g->b[i] >= 0)
                            close(g->b[i]);
                        g->a[i] = g->b[i] = -1;
                        break;
                    }
                    continue;
                }
                if (!pump_bytes(from, to)) {
                    close(g->a[i]);
                    close(g->b[i]);
                    g->a[i] = g->b[i] = -1;
                    break;
                }
            }
        }
    }
    for (int i = 0; i < CUT_MAX; i++) {
        if (g->a[i] >= 0)
            close(g->a[i]);
        if (g->b[i] >= 0)
            close(g->b[i]);
    }
    return NULL;
}

static void cutter_open(cutter_t *g, int target)
{
    memset(g, 0, sizeof *g);
    g->target = target;
    for (int i = 0; i < CUT_MAX; i++)
        g->a[i] = g->b[i] = -1;
    g->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    cr_assert_eq(bind(g->lfd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(g->lfd, 16), 0);
    socklen_t l = sizeof a;
    getsockname(g->lfd, (struct sockaddr *)&a, &l);
    g->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&g->thread, NULL, cutter_main, g), 0);
}

static void cutter_close(cutter_t *g)
{
    atomic_store(&g->stop, true);
    pthread_join(g->thread, NULL);
    close(g->lfd);
}

/* The glue the engine's Sparkplug output will be (rep_spb.h's table), with a
 * source of counter records {"n": i} on one lane, acked as the session says. */
typedef struct spbglue {
    rep__spb_sess_t *s;
    rep_mosq_t *c;
    pthread_mutex_t mu;      /* the source (the test thread appends) */
    uint64_t n, cursor;      /* records 1..n; next to read */
    uint64_t ts[1024];       /* each record's receive time */
    atomic_uint_fast64_t acked;
    char payload[64];
    uint8_t blob[REP_SPB_BDSEQ_BLOB];
    atomic_int farewells;
} spbglue_t;

static int g_read(void *arg, rep__spb_rec_t *out)
{
    spbglue_t *g = arg;
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    if (g->cursor <= g->n) {
        uint64_t i = g->cursor++;
        int len = snprintf(g->payload, sizeof g->payload, "{\"n\":%llu}", (unsigned long long)i);
        *out = (rep__spb_rec_t){ .lane = 0, .token = i, .prefix = "telemetry", .payload = (uint8_t *)g->payload,
                                 .len = (size_t)len, .ts = g->ts[i] };
        rc = 1;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static void g_rewind(void *arg)
{
    spbglue_t *g = arg;
    pthread_mutex_lock(&g->mu);
    g->cursor = atomic_load(&g->acked) + 1;
    pthread_mutex_unlock(&g->mu);
}

static void g_ack(void *arg, uint32_t lane, uint64_t token)
{
    (void)lane;
    atomic_store(&((spbglue_t *)arg)->acked, token);
}

static void g_dead(void *arg, const rep__spb_rec_t *r, const char *why)
{
    (void)arg;
    cr_log_error("dead letter %llu: %s", (unsigned long long)r->token, why);
}

static int g_persist(void *arg, const void *blob, size_t n)
{
    memcpy(((spbglue_t *)arg)->blob, blob, n);
    return 0;
}

static const rep__spb_src_ops_t g_src = { g_read, g_rewind, g_ack, g_dead, g_persist, NULL };

static int g_next(void *arg, rep_mosq_msg_t *msg)
{
    spbglue_t *g = arg;
    rep__spb_out_t out;
    int rc = rep__spb_next(g->s, tb_wall_ms(), &out);
    if (rc == REP_SPB_OUT_FAREWELL) {
        rep__mosq_farewell(g->c, out.topic, out.payload, out.len, 2000, false);
        atomic_fetch_add(&g->farewells, 1);
    }
    if (rc != REP_SPB_OUT_PUBLISH)
        return 0;
    *msg = (rep_mosq_msg_t){ .lane = 0, .token = out.token, .topic = out.topic, .payload = out.payload,
                             .payload_len = out.len };
    return 1;
}

static void g_acked(void *arg, uint32_t lane, uint64_t token)
{
    (void)lane;
    rep__spb_confirmed(((spbglue_t *)arg)->s, tb_wall_ms(), token);
}

static void g_lost(void *arg)
{
    rep__spb_lost(((spbglue_t *)arg)->s, tb_wall_ms());
}

static void g_connecting(void *arg, uint64_t n, rep_mosq_will_t *will)
{
    (void)n;
    rep__spb_will_t w;
    if (rep__spb_attempt(((spbglue_t *)arg)->s, tb_wall_ms(), &w) == 0)
        *will = (rep_mosq_will_t){ .topic = w.topic, .payload = w.payload, .payload_len = w.len };
}

static void g_subscribed(void *arg, const char *topic, int reason)
{
    rep__spb_subscribed(((spbglue_t *)arg)->s, tb_wall_ms(), topic, reason);
}

static void g_message(void *arg, const char *topic, const void *p, size_t len, bool retained)
{
    spbglue_t *g = arg;
    rep__spb_message(g->s, tb_wall_ms(), topic, p, len, retained);
    rep__mosq_kick(g->c);
}

static const rep_mosq_owner_ops_t g_ops = { g_next, g_acked, g_lost, NULL };
static const rep_mosq_session_ops_t g_hooks = { g_connecting, g_subscribed, g_message };

static void glue_start(spbglue_t *g, int port, uint64_t n)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    g->n = n;
    g->cursor = 1;
    for (uint64_t i = 1; i <= n; i++)
        g->ts[i] = tb_wall_ms() + i;
    rep__spb_sess_opts_t so = { .group_id = "G", .edge_node_id = "e1", .confirm_timeout_ms = 1500,
                                .live_window_ms = 1000, .pack = 10, .max_unconfirmed = 1000 };
    char err[200];
    cr_assert_eq(rep__spb_sess_new(&so, &g_src, g, NULL, 0, &g->s, err, sizeof err), 0, "%s", err);
    rep_mosq_opts_t o;
    opts_for(&o, port, "tb-spb-e1");
    o.qos = 0;
    o.clean_session = true;
    o.keepalive_s = 5;
    o.ack_timeout_ms = 1500;
    o.connect_timeout_ms = 1500;
    rep__spb_subscriptions(g->s, &o.subscribe, &o.nsubscribe);
    cr_assert_eq(rep__mosq_new(&o, 1, &g_ops, g, &g->c, err, sizeof err), 0, "%s", err);
    rep__mosq_set_session_ops(g->c, &g_hooks);
    cr_assert_eq(rep__mosq_start(g->c), 0);
}

static void glue_add(spbglue_t *g, uint64_t more)
{
    pthread_mutex_lock(&g->mu);
    cr_assert_lt(g->n + more, 1024);
    for (uint64_t i = 1; i <= more; i++)
        g->ts[g->n + i] = tb_wall_ms() + i;
    g->n += more;
    pthread_mutex_unlock(&g->mu);
    rep__mosq_kick(g->c);
}

static void glue_wait_acked(spbglue_t *g, uint64_t upto, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (atomic_load(&g->acked) < upto) {
        cr_assert_lt(tb_mono_ms(), deadline, "acked %llu of %llu", (unsigned long long)atomic_load(&g->acked),
                     (unsigned long long)upto);
        poll(NULL, 0, 5);
    }
}

/* The host's view: every message on spBv1.0/G/#, decoded, in arrival order. */
typedef struct hostmsg {
    char kind[8];
    long bdseq, seq;
    uint32_t nvals;
    double vals[16];
    bool hist[16];
} hostmsg_t;

typedef struct host {
    struct mosquitto *m;
    pthread_mutex_t mu;
    hostmsg_t *msgs;
    size_t n, cap;
    atomic_bool subscribed;
} host_t;

static void host_on_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    (void)m;
    host_t *h = arg;
    hostmsg_t hm = { .bdseq = -1, .seq = -1 };
    const char *k = strchr(msg->topic + strlen("spBv1.0/"), '/');
    if (!k)
        return;
    snprintf(hm.kind, sizeof hm.kind, "%.*s", (int)strcspn(k + 1, "/"), k + 1);
    Spb__Payload *p = spb__payload__unpack(NULL, (size_t)msg->payloadlen, msg->payload);
    if (!p)
        return;
    hm.seq = p->has_seq ? (long)p->seq : -1;
    for (size_t i = 0; i < p->n_metrics; i++) {
        const Spb__Payload__Metric *me = p->metrics[i];
        if (me->name && strcmp(me->name, "bdSeq") == 0)
            hm.bdseq = (long)me->long_value;
        else if (me->value_case == SPB__PAYLOAD__METRIC__VALUE_DOUBLE_VALUE && hm.nvals < 16) {
            hm.hist[hm.nvals] = me->has_is_historical && me->is_historical;
            hm.vals[hm.nvals++] = me->double_value;
        }
    }
    spb__payload__free_unpacked(p, NULL);
    pthread_mutex_lock(&h->mu);
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->msgs = realloc(h->msgs, h->cap * sizeof *h->msgs);
    }
    h->msgs[h->n++] = hm;
    pthread_mutex_unlock(&h->mu);
}

static void host_on_subscribe(struct mosquitto *m, void *arg, int mid, int n, const int *granted)
{
    (void)m;
    (void)mid;
    if (n >= 1 && granted[0] <= 2)
        atomic_store(&((host_t *)arg)->subscribed, true);
}

static void host_start(host_t *h, int port)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    mosquitto_lib_init();
    h->m = mosquitto_new("test-spb-host", true, h);
    mosquitto_subscribe_callback_set(h->m, host_on_subscribe);
    mosquitto_message_callback_set(h->m, host_on_message);
    cr_assert_eq(mosquitto_connect(h->m, "127.0.0.1", port, 30), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_subscribe(h->m, NULL, "spBv1.0/G/#", 1), MOSQ_ERR_SUCCESS);
    cr_assert_eq(mosquitto_loop_start(h->m), MOSQ_ERR_SUCCESS);
    uint64_t deadline = tb_mono_ms() + 10000;
    while (!atomic_load(&h->subscribed)) {
        cr_assert_lt(tb_mono_ms(), deadline, "host: no SUBACK");
        poll(NULL, 0, 5);
    }
}

/* Judges the host's stream: seq continuity per session, each NDEATH's bdSeq
 * is its session's NBIRTH's, values 1..n all arrive and their first
 * arrivals are in order, no data outside a session; returns duplicates. */
static size_t host_judge(host_t *h, uint64_t n, size_t *deaths, size_t *births, size_t *historical)
{
    pthread_mutex_lock(&h->mu);
    bool *got = calloc(n + 1, 1);
    long bd = -1, seq = -1;
    double maxfirst = 0;
    size_t dups = 0;
    *deaths = *births = *historical = 0;
    for (size_t i = 0; i < h->n; i++) {
        const hostmsg_t *m = &h->msgs[i];
        if (strcmp(m->kind, "NBIRTH") == 0) {
            cr_assert_eq(m->seq, 0);
            bd = m->bdseq;
            seq = 0;
            (*births)++;
            continue; /* a birth's values are snapshots, not data */
        }
        if (strcmp(m->kind, "NDEATH") == 0) {
            cr_assert_eq(m->bdseq, bd, "message %zu: NDEATH bdSeq %ld, its session's NBIRTH had %ld", i, m->bdseq, bd);
            bd = -1;
            (*deaths)++;
            continue;
        }
        cr_assert_str_eq(m->kind, "NDATA");
        cr_assert_geq(bd, 0, "message %zu: NDATA outside a session", i);
        cr_assert_eq(m->seq, (seq + 1) % 256, "message %zu: seq %ld after %ld", i, m->seq, seq);
        seq = m->seq;
        for (uint32_t k = 0; k < m->nvals; k++) {
            uint64_t v = (uint64_t)m->vals[k];
            cr_assert(v >= 1 && v <= n, "value %llu", (unsigned long long)v);
            *historical += m->hist[k];
            if (got[v]) {
                dups++;
                continue;
            }
            cr_assert_gt(m->vals[k], maxfirst, "message %zu: %g first arrives after %g", i, m->vals[k], maxfirst);
            maxfirst = m->vals[k];
            got[v] = true;
        }
    }
    for (uint64_t v = 1; v <= n; v++)
        cr_assert(got[v], "value %llu never arrived", (unsigned long long)v);
    free(got);
    pthread_mutex_unlock(&h->mu);
    return dups;
}

static size_t host_count(host_t *h, const char *kind)
{
    pthread_mutex_lock(&h->mu);
    size_t c = 0;
    for (size_t i = 0; i < h->n; i++)
        c += strcmp(h->msgs[i].kind, kind) == 0;
    pthread_mutex_unlock(&h->mu);
    return c;
}

static void host_wait(host_t *h, const char *kind, size_t n, uint32_t ms)
{
    uint64_t deadline = tb_mono_ms() + ms;
    while (host_count(h, kind) < n) {
        cr_assert_lt(tb_mono_ms(), deadline, "host: %zu %s of %zu", host_count(h, kind), kind, n);
        poll(NULL, 0, 5);
    }
}

/* The silent cut through a real Mosquitto: the line drops every byte both
 * ways and closes nothing. Nothing sent into it is acked; the session is
 * given up by the deadline; the next one (a later bdSeq, a new birth)
 * resends from the last confirmed record; the host sees every value, first
 * arrivals in order, seq continuous per session, each NDEATH with its
 * NBIRTH's bdSeq (the cut session's will, then the last one's on a kill). */
Test(mosq, sparkplug_session_survives_a_silent_cut, .timeout = 120)
{
    broker_t b;
    broker_init(&b);
    broker_start(&b);
    host_t h;
    host_start(&h, b.port);
    cutter_t cut;
    cutter_open(&cut, b.port);
    spbglue_t g;
    glue_start(&g, cut.port, 200);
    glue_wait_acked(&g, 200, 30000);
    host_wait(&h, "NBIRTH", 1, 10000);

    atomic_store(&cut.cut, true);
    poll(NULL, 0, 50); /* let the cutter take the flag before bytes flow (not a synchronisation: a
                          byte that passes before it is simply delivered and confirmed) */
    uint64_t acked_at_cut = atomic_load(&g.acked);
    glue_add(&g, 100);
    rep_mosq_stats_t st;
    uint64_t deadline = tb_mono_ms() + 15000;
    while (rep__mosq_stats(g.c, &st), st.failures < 1) {
        cr_assert_lt(tb_mono_ms(), deadline, "the silent cut is not noticed (%s)", st.last_error);
        poll(NULL, 0, 10);
    }
    cr_assert_eq(atomic_load(&g.acked), acked_at_cut, "a record sent into the cut was acked");
    poll(NULL, 0, 500); /* attempts into the cut: each takes a bdSeq and times out */
    atomic_store(&cut.cut, false);
    glue_wait_acked(&g, 300, 60000);
    host_wait(&h, "NDEATH", 1, 20000); /* the cut session's will (keepalive or takeover) */

    /* a kill: the last session's will */
    rep__mosq_free(g.c);
    host_wait(&h, "NDEATH", 2, 20000);
    size_t deaths, births, historical;
    size_t dups = host_judge(&h, 300, &deaths, &births, &historical);
    rep__spb_sess_stats_t ss;
    rep__spb_sess_stats(g.s, &ss);
    cr_log_info("silent cut: %zu births, %zu deaths, %zu duplicates, %zu historical, bdSeq now %u, "
                "%u connects", births, deaths, dups, historical, ss.bdseq, ss.connects);
    cr_assert_geq(births, 2);
    cr_assert_geq(ss.bdseq, 1);
    cr_assert_gt(historical, 0, "the resent values are historical");
    rep__spb_sess_free(g.s);
    cutter_close(&cut);
    mosquitto_disconnect(h.m);
    mosquitto_loop_stop(h.m, true);
    mosquitto_destroy(h.m);
    free(h.msgs);
    broker_fini(&b);
}
