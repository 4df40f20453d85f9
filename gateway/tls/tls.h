/*
 * tls.h: the server side of TLS, shared by the MQTT listeners
 * (gateway/broker/tls.c) and the HTTP endpoint (gateway/http/http_tls.c):
 * the gateway/tls/ folder's one public header. Prefix tls_. Only this
 * folder includes OpenSSL's headers; its users see opaque types.
 *
 * Two things, both independent of the transport that carries the bytes:
 *
 *   tls_ctx_t     a context made from a `tls` mapping's keys (cfg_tls_t:
 *                 mqtt.listeners[].tls, http.tls): certificate chain and
 *                 key (checked to match), the CAs client certificates are
 *                 verified against, the oldest version, the TLS 1.2 cipher
 *                 list. Loaded apart from its use, so that a file that does
 *                 not load is a configuration error before anything changes
 *                 (at start and at SIGHUP). Reference counted; every SSL made
 *                 from it holds OpenSSL's own count of its SSL_CTX, so an
 *                 established connection keeps the certificate it was made
 *                 with when its server swaps in a new context.
 *
 *   tls_stream_t  one connection's SSL behind a BIO of our own: OpenSSL
 *                 never touches a socket. The caller feeds the ciphertext
 *                 of each read (tls_stream_feed, in place: no copy), steps
 *                 the handshake and reads plaintext; when the SSL wants
 *                 more than was fed, the calls say "later" (0) instead of
 *                 blocking, so the handshake is non-blocking by
 *                 construction. Records the SSL writes reach the caller's
 *                 send function: during the handshake each step's flight
 *                 is gathered and sent as one call, after it every record
 *                 at once. What a read left untaken stays in the stream
 *                 (tls_stream_keep: it says how much, for the caller's
 *                 memory bound), until the caller reads again.
 *
 * Every context: record buffers given back per read batch and per write
 * (tls_stream_release; not SSL_MODE_RELEASE_BUFFERS, which does it per
 * record), a server session cache (TLS_SESSION_CACHE entries)
 * and one TLS 1.3 ticket per handshake (resumption, bounded), no
 * renegotiation (a client-driven CPU cost with no use here), the server's
 * cipher order.
 *
 * THREADS. A context may be loaded on any thread; a stream belongs to the
 * thread that made it (the loop thread). Errors: 0 / -errno / TB_E*.
 */
#ifndef TLS_TLS_H
#define TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

#define TLS_SESSION_CACHE 1024

/* ---- contexts (tls_ctx.c) ------------------------------------------------ */

typedef struct tls_ctx tls_ctx_t;

/*
 * A server context from keys k. `key` names the mapping in errors
 * ("mqtt.listeners[1].tls", "http.tls"), `line` its line in the file (0:
 * not said), `sid` the session id context (one per server: resumption
 * across servers is refused). 0 and *out (one reference), or TB_ECONFIG
 * with err = "KEY.FIELD (line N): FILE: why" ("KEY.FIELD: FILE: why"
 * without a line; no FILE for ciphers). Any thread.
 */
int tls_ctx_load(const cfg_tls_t *k, const char *key, int line, const char *sid, tls_ctx_t **out /* OUT */,
                 char *err, size_t errlen);
tls_ctx_t *tls_ctx_ref(tls_ctx_t *t);
void tls_ctx_unref(tls_ctx_t *t /* NULL: nothing */);

/* What a context's certificate says, for the logs (borrowed from t). */
typedef struct tls_ctx_info {
    const char *cert_file;
    const char *subject;     /* its certificate's CN ("" when it has none) */
    const char *not_after;   /* "Jan  2 03:04:05 2026 GMT" */
    bool expired;            /* notAfter had passed when it was loaded */
    bool require_cert;       /* require_client_cert */
} tls_ctx_info_t;
void tls_ctx_info(const tls_ctx_t *t, tls_ctx_info_t *out /* OUT */);

/* ---- streams (tls_stream.c) ---------------------------------------------- */

typedef struct tls_stream tls_stream_t;

/*
 * Where the records go: p[0..n) must be taken whole (sent, queued or
 * copied) before it returns 0; a negative return (-errno) fails the SSL
 * call that wrote them, which returns that error.
 */
typedef int (*tls_send_fn)(void *arg, const uint8_t *p, size_t n);

/* A server stream on t (the stream's SSL holds t's SSL_CTX: t may be
 * unreffed after), sending through send(arg, ...). NULL: out of memory
 * for the SSL (OpenSSL's queue is cleared). */
tls_stream_t *tls_stream_new(tls_ctx_t *t, tls_send_fn send, void *arg);
/* Frees the SSL and what the stream keeps. NULL: nothing. */
void tls_stream_free(tls_stream_t *s);

/* The ciphertext of one read, lent until the next tls_stream_keep (which
 * copies what the SSL did not take). Taken after what an earlier read left. */
void tls_stream_feed(tls_stream_t *s, const uint8_t *p, size_t n);
/*
 * After the calls on a fed read: keeps what of it the SSL did not take
 * (compacting what it took), and returns the ciphertext the stream holds
 * now, for the caller's memory bound. 0 once discarded.
 */
size_t tls_stream_keep(tls_stream_t *s);
/*
 * Gives OpenSSL's record buffers (16 KB or more each way) back unless they
 * hold something not yet read. tls_stream_keep calls it when a read batch
 * is all taken, tls_stream_write after its records went: a busy connection
 * keeps its buffers from record to record, an idle one holds none.
 */
void tls_stream_release(tls_stream_t *s);
/* Ciphertext kept, or plaintext decrypted and not yet read: another read can make progress. */
bool tls_stream_pending(const tls_stream_t *s);

/*
 * One step of the handshake, on what was fed: 1 done (established), 0 it
 * needs more ciphertext, TB_EPROTO it failed (why: OpenSSL's reason, or the
 * client certificate's verification error; the alert saying so is sent
 * first), or the send function's error (why empty). A stream that failed
 * is fatal: no more SSL calls on it but tls_stream_free.
 */
int tls_stream_handshake(tls_stream_t *s, char *why, size_t whylen);
bool tls_stream_established(const tls_stream_t *s);
/*
 * Decrypts into buf: bytes (> 0), 0 when it needs more ciphertext,
 * TB_ECLOSED at the peer's close_notify, TB_EPROTO for a record that does
 * not decrypt or a TLS error (fatal; why says).
 */
ssize_t tls_stream_read(tls_stream_t *s, void *buf, size_t len, char *why, size_t whylen);
/* Encrypts p[0..n) to the send function. 0; -ENOTCONN before the
 * handshake or after a failure; the send function's error or -EPROTO (fatal). */
int tls_stream_write(tls_stream_t *s, const void *p, size_t n);
/* Sends close_notify when the session is sound (established, not fatal). */
void tls_stream_close_notify(tls_stream_t *s);
/* The connection is going: writes are dropped from here on, what is kept is freed. */
void tls_stream_discard(tls_stream_t *s);
/* The client certificate's subject CN, malloc'd; NULL when there is none (or it holds a NUL). */
char *tls_stream_peer_cn(tls_stream_t *s);

#endif
