/*
 * http.h: the operator's HTTP endpoint (the gateway/http/ folder's one public
 * header). Prefix http_, HTTP_; http__ for what its files share (http_int.h).
 * The request parser (http_parse.c) is its own library, tb_http_parse,
 * linking base only: it reads bytes from outside and is fuzzed alone.
 *
 *   GET /metrics   Prometheus text format 0.0.4 (metrics.h, the catalog)
 *   GET /stats     one JSON document: per upstream topic counts, log, lag,
 *                  the accounting invariant; process, connections, cluster
 *   GET /healthz   200 "ok" while the event loop is responsive
 *   GET /readyz    200 when bootstrapped, MQTT listening and the log
 *                  writable; 503 and the reason otherwise
 *   GET /          the operator's page: HTML, CSS and script embedded in
 *                  the binary, drawing /stats and /stats/history
 *   GET /table     the same figures as server-rendered HTML (no script)
 *   GET /stats/history  the last hour of samples (http_history.c)
 *   GET /admin/config, POST|GET /admin/reload  the admin API (http_admin.c),
 *                  mounted when the gateway gives its ops
 *
 * WHY OUR OWN SERVER. The endpoint runs on the loop that carries MQTT
 * ingestion, so it must be a libuv citizen whose every cost is bounded.
 * libmicrohttpd (Debian: libmicrohttpd12, 0.9.75) either runs its own
 * threads, which would read loop-owned state from another thread (our
 * threading rule forbids it), or is driven by the application through fd
 * sets (MHD_get_fdset/MHD_run): bolting that onto libuv means mirroring
 * descriptors MHD owns into uv_poll handles after every call; and its
 * timeout is per-connection inactivity, not a whole-request deadline, so a
 * slowloris trickle keeps it open. h2o IS packaged in Debian 12, contrary
 * to what we first assumed (apt-cache policy: h2o, libh2o0.13 "H2O library
 * compiled with libuv", libh2o-dev, libh2o-evloop-dev, all 2.2.5, a 2018
 * release whose soname carries the minor version, i.e. no stable library
 * API). It was rejected on its merits: it pulls in libssl, libwslay and an
 * HTTP/2 stack a loopback metrics port does not need, and the limits below
 * (a whole-request deadline, a connection cap that evicts, one buffered
 * response per connection) would still be ours to build around it. What
 * we need is GET/HEAD of a few in-memory documents (and bodiless POSTs for
 * the admin API, issue 19): a few hundred lines we can fuzz
 * (tests/fuzz/fuzz_http_request.c) and bound exactly.
 *
 * LIMITS (http_opts_t; defaults in brackets). A request head (request
 * line + headers) over max_head_bytes [8 KiB] gets 431 and the connection
 * closes. The whole head must arrive within request_timeout_ms [5 s] of
 * connecting (or of its first byte on a kept-alive connection): 408 and
 * close, which cuts off slowloris clients. A kept-alive connection idle for
 * idle_timeout_ms [10 s] is closed. A response not taken by the client
 * within write_timeout_ms [10 s] closes the connection. Requests with a
 * body are refused (Content-Length > 0: 413; Transfer-Encoding: 400) and
 * the connection closes. At most max_conns [64] connections are open: a
 * new one past that evicts the connection that has waited longest without
 * a complete request (idle or incomplete), but never one whose request has
 * arrived unread (http_server.c), so neither a flood nor a churn of idle
 * sockets can lock out the liveness probe; when no slot can be taken the
 * newcomer is answered 503 and closed at once. Reading
 * stops while a response is being written, so a slow reader holds at most
 * one response in memory and pipelined requests wait in the kernel.
 * /metrics, /stats and /table are rendered at most every render_ms [250 ms]
 * (http_endpoints.c, http_page.c), /stats/history once per sample, and /
 * is a copy of a blob built in: clients in a tight loop cannot spend loop time.
 *
 * TLS (http.tls; http_tls.c). With a context (http_server_set_tls) every
 * connection is HTTPS, through a gateway/tls stream: the same engine as the
 * MQTT listeners, fed each libuv read in place. The handshake is
 * non-blocking and inside the request deadline, which runs from the
 * accept: a client that stalls mid-handshake is closed when it expires
 * (counted timeouts{kind="handshake"}; there is no session to send a 408
 * in). A handshake that fails (plain HTTP, garbage, no trusted client
 * certificate) closes that connection alone, after OpenSSL's alert
 * (tls_handshake_failures). Every limit above holds as it is: a handshake
 * is a connection waiting for its request (evictable); the head is
 * decrypted into the same max_head_bytes buffer; a response is encrypted
 * as a whole and its plaintext freed before it is written, so a
 * connection still holds one response; ciphertext read past what the head
 * buffer takes stays in the stream, at most part of a record and one read
 * (2 x HTTP__TLS_RX bytes): reading stops while a response is written and
 * once the head buffer is full (431), and what is kept is read first at the
 * next request. At the cap the 503 is
 * not sent (it would be plain text to a TLS client): the newcomer is closed.
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gateway/metrics/metrics.h"
#include "gateway/tls/tls.h"

/* ---- requests (http_parse.c: pure functions, fuzzed) -------------------- */

/* POST takes no body either (http_parse: Content-Length > 0 is 413): its
 * parameters are in the path and the query (the admin API, issue 19). */
typedef enum { HTTP_GET = 1, HTTP_HEAD, HTTP_OTHER, HTTP_POST } http_method_t;

typedef struct http_req {
    http_method_t method;
    const char *path;  /* NUL-terminated, starts with '/', without the query */
    const char *query; /* NUL-terminated, after '?'; "" when absent */
    int minor;         /* HTTP/1.<minor>, 0 or 1 */
    bool keep_alive;   /* after Connection and the version's default */
    const char *authorization; /* the Authorization header's value, NUL-terminated; "" when absent */
    bool peer_loopback; /* the peer is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104 (set by the server, not the parser) */
    const char *peer;   /* "127.0.0.1:40312", "[::1]:40312" (the server's; "" outside a connection) */
    struct http__conn *conn; /* the server's: the connection (NULL outside one: http_service_answer) */
} http_req_t;

/*
 * Where the request head ends: the offset just past its blank line, or 0
 * when it has not arrived yet. Searching restarts at `from` (a previous
 * call's len), so a head that trickles in is scanned once overall.
 */
size_t http_head_end(const char *buf, size_t len, size_t from);

/* The decimal value of `key` in a query string ("a=1&b=2", http_req_t.query): true and *out when the
 * key is there with digits only (no sign, no overflow past UINT64_MAX - 9), else false. */
bool http_query_u64(const char *query, const char *key, uint64_t *out /* OUT */);

/*
 * Parses the complete head buf[0..len) (len from http_head_end). Writes
 * NULs into buf; req's strings point into it. Returns 0, or the status to
 * answer before closing: 400 (malformed, missing Host on 1.1, a
 * Transfer-Encoding), 413 (Content-Length > 0), 505 (not HTTP/1.x).
 * A method other than GET, HEAD and POST is not an error here (method OTHER).
 */
int http_parse(char *buf, size_t len, http_req_t *req /* OUT */);

/* "OK", "Not Found", ...; "Unknown" for codes we never send. */
const char *http_reason(int status);

/* ---- the server (http_server.c, http_conn.c) ---------------------------- */

/*
 * Called on the loop thread with the request; appends the body to `out`
 * and may set *content_type (default "text/plain; charset=utf-8"). Returns
 * the status code (outside 100..599: the server answers 500). For HEAD the
 * handler runs as for GET and the server sends only the headers. A handler
 * must answer from memory: it must not block; what takes longer is
 * deferred (HTTP_DEFER, below) and answered from the loop later.
 */
typedef int (*http_handler_fn)(void *arg, http_req_t *req, tb_buf_t *out /* body */,
                                  const char **content_type /* OUT */);

/*
 * DEFERRED ANSWERS. A handler that cannot answer from memory at once (a
 * document dumped on the thread pool, a reload) calls http_defer(req) and
 * returns HTTP_DEFER; later, on the loop thread and after the handler has
 * returned, it calls http_pending_answer() exactly once. Meanwhile the
 * connection waits (state WAITING: not read, not evictable) for at most
 * answer_timeout_ms [30 s], then it is answered 504 and closed; a drain
 * answers it 503. Either way the pending stays valid for its handler, is
 * "gone" (http_pending_gone) and its answer is dropped: the connection and
 * the handler hold one reference each and the second release frees it.
 * A peer that closes meanwhile is seen when the answer is written (reading
 * is stopped, as while a response is written). At most HTTP_MAX_PENDING
 * connections wait at once.
 */
#define HTTP_DEFER 1000 /* a handler's return value: the answer follows through its http_pending_t */
#define HTTP_MAX_PENDING 8
typedef struct http_pending http_pending_t;
/* The request's connection as a pending answer; NULL when the request came
 * without one (http_service_answer), HTTP_MAX_PENDING wait already, or the
 * server drains: the handler answers synchronously then. */
http_pending_t *http_defer(http_req_t *req);
/* The answer (body taken over, left empty; status outside 100..599 sends
 * 500). Loop thread; releases the handler's reference: p is freed or
 * belongs to nobody after it. */
void http_pending_answer(http_pending_t *p, int status, const char *content_type, tb_buf_t *body);
/* The connection no longer waits for this answer (closed, timed out, drained). */
bool http_pending_gone(const http_pending_t *p);

typedef struct http_opts {
    size_t max_head_bytes;       /* request line + headers */
    uint64_t request_timeout_ms; /* the whole head, from connect or its first byte */
    uint64_t idle_timeout_ms;    /* between requests on a kept-alive connection */
    uint64_t write_timeout_ms;   /* for the client to take one response */
    uint64_t linger_ms;          /* after a final response, reading and discarding until EOF */
    uint64_t answer_timeout_ms;  /* a deferred answer (HTTP_DEFER) within this, else 504 */
    unsigned max_conns;
} http_opts_t;

void http_opts_default(http_opts_t *o /* OUT */);

/* Counters kept by the server (plain integers on the loop thread). */
typedef struct http_stats {
    uint64_t accepted;       /* connections taken in a slot */
    uint64_t refused;        /* answered 503 at the cap */
    uint64_t evicted;        /* closed to make room */
    uint64_t timeouts[METRICS_HTTP_TIMEOUT__COUNT];
    uint64_t responses;
    uint64_t by_code[16];    /* index metrics_http_code_index(status) */
    uint64_t handler_calls;
    uint64_t tls_handshake_failures; /* http.tls: handshakes that failed (closed) */
    unsigned conns;          /* open now */
    size_t out_bytes;        /* response bytes waiting for clients now */
    size_t out_high_water;   /* most response bytes ever held for one connection */
    unsigned pending;        /* connections waiting for a deferred answer now */
    uint64_t deferred;       /* requests answered later (HTTP_DEFER) */
    uint64_t deferred_timeouts; /* of those, answered 504 at answer_timeout_ms */
} http_stats_t;

typedef struct http_server http_server_t;

/*
 * A server on `loop` (opts NULL: defaults). It owns a libuv handle from
 * here on, so it ends with http_close() and then http_server_free().
 */
int http_server_new(uv_loop_t *loop, const http_opts_t *opts, http_server_t **out /* OUT */);
/* Serves GET/HEAD `path` (exact match, query ignored) with fn. 0, TB_EFULL or TB_EINVALID. */
int http_route(http_server_t *s, const char *path, http_handler_fn fn, void *arg);
/*
 * The same for the methods in `methods` (HTTP_M_*): one path may have a
 * route per method (GET /x answers, POST /x acts). A request whose path has
 * routes but none for its method is 405 with Allow naming the path's
 * methods; a path without routes is 404 (any method but OTHER, which is 405
 * everywhere). TB_EINVALID also for no method, or a method the path already
 * has.
 */
enum { HTTP_M_GET = 1 << 0 /* and HEAD */, HTTP_M_POST = 1 << 1 };
int http_route_methods(http_server_t *s, unsigned methods, const char *path, http_handler_fn fn, void *arg);
/* The same for every path that starts with `prefix` (e.g. "/admin/topics/")
 * and has no exact route of its own (exact routes keep priority). */
int http_route_prefix(http_server_t *s, unsigned methods, const char *prefix, http_handler_fn fn, void *arg);
/*
 * Listens on "host:port" or "[v6]:port" (port 0: ephemeral) and logs
 * "http listening" with addr=HOST:PORT (the bound port). 0 or -errno /
 * TB_ECONFIG; on failure nothing is listening.
 */
int http_listen(http_server_t *s, const char *addr);
/*
 * Serves HTTPS with t (taken over: one reference; NULL: plain HTTP, before
 * http_listen only). Again on reload: new handshakes use the new context,
 * established connections keep theirs (their SSL holds its SSL_CTX).
 */
void http_server_set_tls(http_server_t *s, tls_ctx_t *t);
/* "127.0.0.1:9090" / "[::1]:9090" once listening, else "". */
const char *http_bound(const http_server_t *s);
void http_get_stats(const http_server_t *s, http_stats_t *out /* OUT */);
/*
 * Drains: stops accepting, closes idle and incomplete connections, lets
 * responses being written finish (bounded by write_timeout_ms), then closes
 * them. done(arg) is called once, from a later loop turn, when every handle
 * is closed.
 */
void http_close(http_server_t *s, void (*done)(void *arg), void *arg);
/* After done has run. NULL is allowed. */
void http_server_free(http_server_t *s);

/* ---- what the endpoints report: the provider the lead fills ------------- */

typedef enum {
    HTTP_CLUSTER_UNKNOWN, HTTP_CLUSTER_CONNECTING, HTTP_CLUSTER_CONNECTED, HTTP_CLUSTER_UNREACHABLE, HTTP_CLUSTER__COUNT
} http_cluster_state_t;
extern const char *const http_cluster_states[HTTP_CLUSTER__COUNT];

typedef enum {
    HTTP_TOPIC_UNKNOWN,     /* no provider */
    HTTP_TOPIC_IDLE,        /* nothing waiting */
    HTTP_TOPIC_REPLICATING, /* sending, keeping up */
    HTTP_TOPIC_CATCHING_UP, /* sending a backlog */
    HTTP_TOPIC_STALLED,     /* waiting messages, no progress within the deadline */
    HTTP_TOPIC_FAILED,      /* not accepting (failed fsync, ...) */
    HTTP_TOPIC_PAUSED,      /* POST /admin/topics/T/pause: its replication holds, the log takes its messages */
    HTTP_TOPIC_RETIRING,    /* no mapping routes to it (a reload): its backlog replicates, then it is retired */
    HTTP_TOPIC_RETIRED,     /* drained and removed from disk (its counters are the final ones) */
    HTTP_TOPIC_KEPT,        /* drained, wal.retire: keep: its directory stays, not replicated */
    HTTP_TOPIC__COUNT
} http_topic_state_t;
extern const char *const http_topic_states[HTTP_TOPIC__COUNT];

typedef struct http_readiness {
    bool bootstrap_done;
    bool mqtt_listening;
    bool wal_writable;
    bool draining; /* shutdown has started */
    bool quiesced; /* POST /admin/drain: not accepting, replicating what is left */
} http_readiness_t;

/* One of the clients that publish most (http_provider_t.top_talkers). */
#define HTTP_TOP_TALKERS 5
typedef struct http_talker {
    char client_id[64];
    double messages_per_second;
} http_talker_t;

/* An output's words for /stats (http_provider_t.output_info). */
typedef struct http_output_info {
    const char *kind;            /* "danube", "mqtt", ... (static) */
    const char *state;           /* metrics_output_states' words (static) */
    char last_error[256];        /* "" when none */
    uint64_t max_bytes_per_s;    /* its rate caps; 0: no cap */
    uint64_t max_messages_per_s;
    uint64_t throttled_ms;       /* summed over its topics */
    struct {                     /* kind sparkplug: the session ("sparkplug" in /stats) */
        bool valid;
        const char *phase;       /* static */
        uint32_t bdseq, seq, connects, unconfirmed;
        uint64_t nbirths, dbirths, data_msgs, metrics, confirmed, rebirth_cmds, deadline_ends;
        bool host_online;
    } spb;
} http_output_info_t;

/*
 * State that is not a metric. Every callback runs on the loop thread during
 * a request, must not block, and may be NULL. Metric values themselves come
 * from the registry (loop-owned updates and collectors, metrics.h).
 */
typedef struct http_provider {
    void *arg;
    /* NULL: never ready ("no readiness provider") */
    void (*readiness)(void *arg, http_readiness_t *out /* OUT */);
    /* false and a reason in why: /healthz answers 503 (e.g. a failed fsync). NULL: healthy. */
    bool (*healthy)(void *arg, char *why, size_t whylen);
    /* NULL: unknown */
    http_cluster_state_t (*cluster_state)(void *arg);
    /* `topic` indexes metrics_topics(); NULL: unknown */
    http_topic_state_t (*topic_state)(void *arg, size_t topic);
    /* `listener` indexes metrics_listeners(): does it speak TLS? NULL: unknown (null in /stats) */
    bool (*listener_tls)(void *arg, size_t listener);
    /* up to n clients by PUBLISHes per second, busiest first, and the window it was measured over
     * (/stats connections.top_talkers); NULL: not reported (null in /stats) */
    size_t (*top_talkers)(void *arg, http_talker_t *out /* OUT */, size_t n, double *window_seconds /* OUT */);
    /* `output` indexes metrics_outputs(): what /stats outputs[] shows beside its metrics; false:
     * unknown (nulls). NULL: not reported. */
    bool (*output_info)(void *arg, size_t output, http_output_info_t *out /* OUT */);
    /* whether output carries topic (metrics_topics() index): its lane is in outputs[].topics */
    bool (*output_carries)(void *arg, size_t output, size_t topic);
    /* true and words in buf when the cluster refuses the edge, which is not an outage (/readyz stays
     * 200 and says so; /stats cluster.problem): "credentials refused (UNAUTHENTICATED: ...) since
     * <time>". NULL or false: none. */
    bool (*cluster_problem)(void *arg, char *buf, size_t len);
    /* the same for one topic (a refusal, a poison batch held): /stats topics[].problem */
    bool (*topic_problem)(void *arg, size_t topic, char *buf, size_t len);
} http_provider_t;

/* ---- the service: server + endpoints + loop health (http_service.c) ---- */

typedef struct http_service_opts {
    http_opts_t http;
    uint64_t tick_ms;      /* loop health tick period [1000] */
    uint64_t max_lag_ms;   /* /healthz 503 past this tick lateness [3000] */
    uint64_t render_ms;    /* /metrics and /stats are rendered at most once per this [250]; 0: every request */
    const char *edge_name; /* shown in /stats; may be NULL */
    bool token_probes;     /* /healthz and /readyz need the token too [false] */
    uint64_t history_ms;   /* the page's sample ring takes one sample per this [5000] */
} http_service_opts_t;

void http_service_opts_default(http_service_opts_t *o /* OUT */);

typedef struct http_service http_service_t;

/*
 * The endpoint over registry `m` (with the catalog registered) and provider
 * `p` (copied; NULL: all unknown). Owns libuv handles from here on: end
 * with http_service_close() then http_service_free().
 */
int http_service_new(uv_loop_t *loop, const http_service_opts_t *o, metrics_t *m,
                        const http_provider_t *p, http_service_t **out /* OUT */);
/* Mounts the endpoints, starts the health tick and the sample ring, listens. See http_listen. */
int http_service_listen(http_service_t *s, const char *addr);
http_server_t *http_service_server(http_service_t *s);
/* The bearer token /metrics and /stats (and the probes, with token_probes)
 * ask for (copied; NULL or "": none). Answered 401 without it. At start and
 * on reload. */
void http_service_set_token(http_service_t *s, const char *token);
/* http_server_set_tls on the service's server, logged with the
 * certificate's subject and expiry ("http TLS certificate", "... reloaded";
 * a warning once it has expired). At start before listening, and on reload. */
void http_service_set_tls(http_service_t *s, tls_ctx_t *t);
void http_service_close(http_service_t *s, void (*done)(void *arg), void *arg);
void http_service_free(http_service_t *s);


/*
 * Answers one parsed request as the listener would (mounting the routes at
 * the first call when http_service_listen has not): the fuzz target and
 * the bench drive the endpoints through it without a socket. Returns the
 * status; body in out, *content_type as a handler sets it.
 */
int http_service_answer(http_service_t *s, http_req_t *req, tb_buf_t *out, const char **content_type /* OUT */);
/* Takes one sample into the page's ring now (the timer does it every history_ms). */
void http_service_sample(http_service_t *s);
/* Bytes the sample ring holds once allocated (fixed: HTTP_HISTORY_SAMPLES x topics capped). */
size_t http_history_bytes(void);

/* Loop health: true when the last tick ran on time; else false and why. */
bool http_service_healthy(http_service_t *s, char *why, size_t whylen);
/* Readiness: true when ready; else false and the reason. */
bool http_service_ready(http_service_t *s, char *why, size_t whylen);

/* ---- the admin API (http_admin.c) --------------------------------------- */

/*
 * /admin/... on the same listener (RELOAD.md 6): GET /admin/config, POST
 * /admin/reload, GET /admin/reload, POST /admin/topics/NS/T/pause|resume|retire|forget,
 * POST|GET /admin/drain[?wait_ms=N] (POST with wait_ms: the answer waits,
 * deferred, until the state is no longer "draining" or wait_ms passed,
 * checked at each health tick; at most answer_timeout_ms less a second),
 * POST /admin/drain/cancel. Bodiless: parameters would be in the
 * path and the query. ACCESS: with an admin token (http.admin_token_file)
 * every call must carry it ("Authorization: Bearer <token>", or HTTP
 * Basic with it as the password; compared in constant time), from any
 * peer: 401 without it or with another. Without one, only loopback peers
 * (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) are served, and they must carry
 * the metrics token when http.auth_token_file is set (401): any other peer
 * is 403, whatever it carries, so an ops port opened to the pod network for
 * probes and Prometheus is not an admin port by default, and the metrics
 * token Prometheus holds grants admin only from loopback. Every call is
 * logged at info with its peer and status.
 */
typedef struct http_admin_ops {
    void *arg;
    /* POST /admin/reload: runs the reload now, on the loop thread. Returns
     * its answer (a new reference: RELOAD.md 3.3's document) and *status
     * (200 applied or unchanged, 422 refused, 503 shutting down). */
    json_t *(*reload)(void *arg, int *status /* OUT */);
    /* GET /admin/reload: the last answer (a new reference); NULL: no reload yet (404). */
    json_t *(*last_reload)(void *arg);
    /* GET /admin/config: the configuration in force as YAML, secrets masked. */
    void (*config)(void *arg, tb_buf_t *out);
    /* POST /admin/topics/NS/T/pause|resume (topic "/NS/T"): {"topic","paused"}
     * and *status 200; 404 (unknown topic), 503 (not running) with
     * {"error"} in words. Idempotent. NULL: the routes are 404. */
    json_t *(*pause)(void *arg, const char *topic, bool paused, int *status /* OUT */);
    /* POST /admin/topics/NS/T/retire and .../forget?confirm=yes (forget; the
     * route checks confirm=yes, 400 without): a topic no mapping routes to
     * (retiring or kept) is retired now ({"topic","state","backlog_messages",
     * "backlog_bytes"}, *status 202 "removing": it runs on the pool; poll
     * /stats for "retired"); retire refuses a backlog (409 with it), forget
     * deletes it. 200 for one already retired, 409 for one still mapped,
     * 404 unknown, 503 not running, with {"error"} in words. NULL: 404. */
    json_t *(*retire)(void *arg, const char *topic, bool forget, int *status /* OUT */);
    /* POST /admin/drain (start: begins it, idempotent) and GET /admin/drain:
     * {"state": "running"|"draining"|"drained", "remaining_messages",
     * "remaining_topics", "paused_not_drained"} and *status (200, 503).
     * NULL: the route is 404. */
    json_t *(*drain)(void *arg, bool start, int *status /* OUT */);
    /* POST /admin/drain/cancel: accepting again; the drain document and
     * *status 200 (idempotent), 409 while connections are still closing.
     * NULL: the route is 404. */
    json_t *(*drain_cancel)(void *arg, int *status /* OUT */);
    /* The dead-letter log (RELOAD.md 5.7; NULL: not mounted). Each returns a new reference and *status.
     * GET /admin/dlq?from=N&limit=K: a page from max(N, checkpoint + 1), at most K (<= 1000) records or
     * 1 MiB; GET /admin/dlq?offset=N: that one record (404 when not there). */
    json_t *(*dlq_list)(void *arg, uint64_t from, uint32_t limit, uint64_t offset, int *status /* OUT */);
    /* POST /admin/dlq/replay?from=N&to=M (at most 10,000 records): routed and validated again. The
     * document says "durable"; when false and *wait_id is not 0, the copies are on their way to their
     * logs: dlq_replay_settled(arg, id, false) says 1 once they are kept, -1 when that cannot be said
     * any more (a refusal meanwhile; an unknown id), 0 while waiting; with forget true it drops the wait
     * (-1). Either non-zero answer ends the wait (the id is unknown after it). */
    json_t *(*dlq_replay)(void *arg, uint64_t from, uint64_t to, int *status /* OUT */, uint64_t *wait_id /* OUT */);
    int (*dlq_replay_settled)(void *arg, uint64_t id, bool forget);
    /* POST /admin/dlq/purge?to=M&confirm=yes: the dead letters up to M are deleted. */
    json_t *(*dlq_purge)(void *arg, uint64_t to, int *status /* OUT */);
} http_admin_ops_t;

/* Mounts the admin routes on the next http_service_listen (ops copied;
 * NULL: none, the paths are 404). Before http_service_listen. */
void http_service_set_admin(http_service_t *s, const http_admin_ops_t *ops);
/* The admin token (copied; NULL or "": none: loopback only). At start and on reload. */
void http_service_set_admin_token(http_service_t *s, const char *token);

/* ---- /stats (http_stats.c) ---------------------------------------------- */

/* The /stats document (new reference). Runs the collectors first. */
json_t *http_stats_json(http_service_t *s);
/* Field names of /stats that are not catalog metrics (for docs checks), NULL-terminated. */
extern const char *const http_stats_fields[];

#endif
