/*
 * http_int.h: the server's and connections' layout, shared by
 * http_server.c (listener, slots, routing, drain) and http_conn.c (one
 * connection's state machine) only.
 *
 * Connection states (http_conn.c maps the transitions):
 *   READING  waiting for a complete request head; deadline request_timeout
 *   IDLE     kept alive between requests, nothing received; deadline idle
 *   WRITING  one response handed to uv_write, reading stopped; deadline write
 *   LINGER   final response sent, FIN sent, reading and discarding until
 *            EOF so the kernel does not reset the response away; deadline linger
 *   WAITING  a handler deferred its answer (HTTP_DEFER): reading stopped,
 *            not evictable; deadline answer_timeout (504)
 *   CLOSING  uv_close called on both handles; freed when both callbacks ran
 * With http.tls the handshake happens in READING (its deadline covers it).
 */
#ifndef HTTP_HTTP_INT_H
#define HTTP_HTTP_INT_H

#include "gateway/http/http.h"

#define HTTP_MAX_ROUTES 32

/* The page's sample ring (http_history.c): an hour at 5 s, 8 topics with series of their own. */
#define HTTP_HISTORY_SAMPLES 720
#define HTTP_HISTORY_TOPICS 8
typedef struct http__history http__history_t;

typedef enum {
    HTTP__CONN_READING, HTTP__CONN_IDLE, HTTP__CONN_WRITING, HTTP__CONN_LINGER, HTTP__CONN_WAITING, HTTP__CONN_CLOSING
} http__conn_state_t;

/* A deferred answer: one reference for the connection (dropped when it is
 * answered, times out, drains or closes), one for the handler (dropped by
 * http_pending_answer). */
struct http_pending {
    struct http__conn *conn; /* NULL once gone */
    int refs;
    bool head_only, keep_alive;
    int minor;
};

typedef struct http__conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t sd;
    http_server_t *srv;
    struct http__conn *prev, *next; /* in srv's list; moved to the tail when it starts waiting */
    http__conn_state_t state;
    int handles;          /* of tcp and timer, not yet closed */
    char *in;             /* request head bytes, srv->opts.max_head_bytes, allocated on first read */
    size_t in_len;
    size_t scanned;       /* http_head_end already searched in[0..scanned) */
    tb_buf_t head, body;  /* the response being written (plain) or encrypted (TLS) */
    size_t out_len;
    bool close_after;     /* the response being written is the last one */
    tls_stream_t *tls;    /* http.tls: its stream (NULL: plain HTTP) */
    tb_buf_t tx;          /* TLS: records written by the stream, until handed to libuv */
    bool tls_peer_done;   /* TLS: the client's close_notify came; what came before it is answered, then closed */
    bool peer_loopback;   /* from uv_tcp_getpeername at accept */
    char peer[64];        /* the peer's address:port, for the admin log */
    http_pending_t *pending; /* WAITING: the answer it waits for */
} http__conn_t;

struct http_server {
    uv_loop_t *loop;
    http_opts_t opts;
    uv_tcp_t listener;    /* initialised in http_server_new, closed in http_close */
    tls_ctx_t *tls;       /* http.tls: the context of new handshakes (a reference; NULL: plain) */
    bool listening;
    bool closing;
    bool listener_closed;
    struct {
        char *path;
        unsigned methods;   /* HTTP_M_* */
        bool prefix;        /* http_route_prefix: path is a prefix */
        http_handler_fn fn;
        void *arg;
    } routes[HTTP_MAX_ROUTES];
    size_t nroutes;
    http__conn_t *head, *tail; /* open connections, longest waiting first */
    unsigned nalloc;              /* connections and refusals whose memory is not yet freed */
    http_stats_t stats;
    char bound[80];
    void (*done)(void *arg);
    void *done_arg;
};

/* The operator's endpoint: a server, the provider, the loop health tick. */
struct http_service {
    uv_loop_t *loop;
    http_service_opts_t opts;
    metrics_t *m;
    http_provider_t p;
    http_server_t *srv;
    uv_timer_t tick;
    uint64_t last_tick_ns; /* when the tick last ran (monotonic) */
    uint64_t lag_ns;       /* how late it ran */
    struct {
        tb_buf_t body;     /* the last rendering of /metrics, /stats, /stats?pretty, /table */
        uint64_t at_ms;
        bool valid;
    } rendered[4];
    struct http__render_job *job[3]; /* /stats, /stats?pretty being dumped on the thread pool (index as rendered[]) */
    uv_timer_t hist_timer; /* takes a sample every opts.history_ms */
    http__history_t *hist; /* NULL until the first sample */
    tb_buf_t hist_body;    /* the last rendering of /stats/history */
    uint64_t hist_body_seq; /* the sample it shows (valid with hist_body_valid) */
    bool hist_body_valid;
    bool mounted;
    char *token;           /* the bearer token asked for (NULL: none) */
    char *admin_token;     /* http.admin_token_file's (NULL: none: loopback peers only) */
    http_admin_ops_t admin; /* admin.reload NULL: no admin routes */
    struct http__drain_wait *drain_waits; /* POST /admin/drain?wait_ms: answers waiting (http_admin_drain.c) */
    struct http__dlq_wait *dlq_waits; /* POST /admin/dlq/replay: answers waiting for the copies (http_admin.c) */
    bool closing;
    int open;              /* the tick, the history timer, the server and each job on the pool, until done */
    void (*done)(void *arg);
    void *done_arg;
};

/* http_conn.c */
void http__conn_accept(http_server_t *s);
void http__conn_close(http__conn_t *c);
void http__conn_drain(http__conn_t *c);

/* http_tls.c: a connection's TLS stream (c->tls), for http_conn.c */
#define HTTP__TLS_RX 17408 /* bytes of one read: a whole TLS record (16 KiB and its overhead) */
/* Gives c its stream on srv->tls. false: no memory for it. */
bool http__tls_open(http__conn_t *c);
/* Where each read of a TLS connection goes (one buffer for all: read and handled at once). */
void http__tls_rxbuf(uv_buf_t *buf /* OUT */);
/* Runs the stream on the read just fed to it (or on what it kept): the
 * handshake, then plaintext into c->in up to max_head_bytes; keeps what is
 * left and sends what the stream wrote. 0 (the client's close_notify sets
 * c->tls_peer_done), or negative: close c (a failed handshake, counted and
 * logged; a TLS error; a write refused). */
int http__tls_pump(http__conn_t *c);
/* Sends what the stream wrote outside a response (flights, alerts,
 * close_notify) in a write of its own. 0 or -errno. */
int http__tls_flush(http__conn_t *c);

/* http_endpoints.c: mounts /metrics, /stats, /healthz, /readyz, and the page's (once). */
int http__endpoints_mount(http_service_t *s);
/* Does req carry the service's token (or is none asked for)? */
bool http__token_ok(const http_service_t *s, const http_req_t *req);
/* Does req carry `token` (Bearer, or Basic's password; constant time)? token non-NULL. */
bool http__req_has_token(const char *token, const http_req_t *req);

/* http_admin.c: mounts /admin/config and /admin/reload (when the gateway gave the ops). */
int http__admin_mount(http_service_t *s);
/* http_admin_drain.c: the pause/resume and drain routes (mounted by http__admin_mount) */
int http__admin_mount_ops(http_service_t *s);
/* "/admin/topics/NS/T/VERB" -> topic "/NS/T" and VERB (a pointer into path); false: not that shape. */
bool http__admin_topic_path(const char *path, char *topic, size_t topiclen, const char **verb);
int http__admin_access(const http_service_t *s, const http_req_t *req, tb_buf_t *out);
int http__admin_logged(const http_req_t *req, int status);
void http__admin_put_json(tb_buf_t *out, json_t *doc);
/* Does the query hold exactly the pair "k=v" (e.g. "confirm=yes")? */
bool http__query_has(const char *query, const char *pair);
/* each health tick: answers the drain waits that are due; at free: drops them */
void http__admin_tick(http_service_t *s);
void http__admin_free(http_service_t *s);
/* http_admin.c: the dead-letter replays' waits, at each tick and at the end. */
void http__dlq_tick(http_service_t *s);
void http__dlq_free(http_service_t *s);
/* The 401 body; returns 401. */
int http__unauthorized(tb_buf_t *out);

/* http_service.c: one of s->open is done (a handle closed, a job came back). */
void http__service_one_closed(http_service_t *s);

/* http_page.c: the operator's page: / (the embedded page), /table (the
 * same figures rendered by the server, for a browser without scripts),
 * /stats/history (the sample ring). */
int http__page_mount(http_service_t *s);

/* http_history.c */
void http__history_sample(http_service_t *s);  /* runs the collectors; the first call is the baseline */
uint64_t http__history_seq(const http_service_t *s);
/* Messages received per second by topic (a metrics_topics() index) over the last interval; < 0: not known yet. */
double http__history_topic_rate(const http_service_t *s, size_t topic);
void http__history_render(http_service_t *s, tb_buf_t *out); /* the /stats/history document */
void http__history_free(http_service_t *s);

/* http_server.c */
void http__list_append(http_server_t *s, http__conn_t *c);
void http__list_remove(http_server_t *s, http__conn_t *c);
/* Runs the route's handler (or answers 404/405); returns the status, body in
 * out; *allow: a 405's Allow methods (HTTP_M_*). */
int http__dispatch(http_server_t *s, http_req_t *req, tb_buf_t *out, const char **ctype, unsigned *allow);
/* A connection's memory was freed: the drain may be complete. */
void http__released(http_server_t *s);

#endif
