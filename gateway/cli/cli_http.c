/*
 * cli_http.c: the smallest blocking HTTP/1.1 GET (and bodiless POST), for
 * `tributary status` and `tributary admin`
 * (a CLI process, never the event loop), over plain TCP or TLS. One
 * deadline covers connect, the TLS handshake, send and receive, enforced
 * with non-blocking sockets and poll(2), so an endpoint that accepts and
 * then says nothing costs the operator at most the timeout.
 * "Connection: close" lets the body run to EOF; Content-Length is honoured
 * when present. Chunked responses are not needed (our server never sends
 * them) and are refused as malformed.
 *
 * HTTPS (the gateway's http.tls): OpenSSL 3 on the socket itself, as a
 * client does; the server's certificate is verified against --cafile (or
 * the system's CAs) and must name the host of the address (its DNS name,
 * or the IP literal as an IP subjectAltName). A client certificate is sent
 * when given (http.tls.require_client_cert).
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_HEAD 16384

static int remaining(uint64_t deadline)
{
    uint64_t now = tb_mono_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits for `events` on fd until the deadline. 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int ms = remaining(deadline);
        if (ms == 0)
            return -ETIMEDOUT;
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int connect_one(const struct addrinfo *ai, uint64_t deadline, int *fd_out)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        rc = errno == EINPROGRESS ? wait_fd(fd, POLLOUT, deadline) : -errno;
        if (rc == 0) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            rc = -err;
        }
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

/* "host:port" / "[v6]:port" into host and port. 0 or TB_ECONFIG. */
static int split_hostport(const char *a, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *h = a, *colon;
    size_t hl;
    if (*a == '[') {
        const char *rb = strchr(a, ']');
        if (!rb || rb[1] != ':')
            return TB_ECONFIG;
        h = a + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(a, ':');
        if (!colon)
            return TB_ECONFIG;
        hl = (size_t)(colon - a);
    }
    size_t pl = strlen(colon + 1);
    if (hl == 0 || hl >= hostlen || pl == 0 || pl >= portlen)
        return TB_ECONFIG;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, colon + 1, pl);
    port[pl] = '\0';
    return 0;
}

static int dial(const char *host, const char *port, uint64_t deadline, int *fd)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return TB_ECONFIG;
    int rc = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        if ((rc = connect_one(ai, deadline, fd)) == 0 || rc == -ETIMEDOUT)
            break;
    freeaddrinfo(res);
    return rc;
}

/* ---- the connection: a socket, or TLS on it ------------------------------ */

typedef struct {
    int fd;
    SSL *ssl;       /* NULL: plain */
    char *why;      /* a TLS failure's reason */
    size_t whylen;
} conn_t;

/* OpenSSL's reason for the failure just seen (the queue cleared). */
static int tls_failed(conn_t *c, const char *what)
{
    long v = c->ssl ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    unsigned long e = ERR_peek_last_error();
    if (v != X509_V_OK)
        snprintf(c->why, c->whylen, "%s: the gateway's certificate: %s", what, X509_verify_cert_error_string(v));
    else
        snprintf(c->why, c->whylen, "%s: %s", what,
                 e ? ERR_reason_error_string(e) : "the gateway closed the connection");
    ERR_clear_error();
    return TB_EPROTO;
}

/* Waits for what the SSL asked for (after a call returned r). 0, or an error. */
static int tls_wait(conn_t *c, int r, uint64_t deadline, const char *what)
{
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return wait_fd(c->fd, POLLIN, deadline);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_fd(c->fd, POLLOUT, deadline);
    if (e == SSL_ERROR_SYSCALL && errno && ERR_peek_error() == 0)
        return -errno;
    return tls_failed(c, what);
}

static int tls_start(conn_t *c, const char *host, const cli_http_req_t *r, uint64_t deadline)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return tls_failed(c, "TLS");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* a close without close_notify ends the body */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int ok = r->cafile ? SSL_CTX_load_verify_locations(ctx, r->cafile, NULL) : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        SSL_CTX_free(ctx);
        ERR_clear_error();
        snprintf(c->why, c->whylen, "--cafile %s: no CA certificate could be loaded (PEM expected)", r->cafile);
        return TB_ECONFIG;
    }
    if (r->cert_file && (SSL_CTX_use_certificate_chain_file(ctx, r->cert_file) != 1 ||
                         SSL_CTX_use_PrivateKey_file(ctx, r->key_file ? r->key_file : r->cert_file, SSL_FILETYPE_PEM) != 1 ||
                         SSL_CTX_check_private_key(ctx) != 1)) {
        SSL_CTX_free(ctx);
        unsigned long e = ERR_peek_last_error();
        snprintf(c->why, c->whylen, "--cert %s / --key %s: %s", r->cert_file, r->key_file ? r->key_file : r->cert_file,
                 e ? ERR_reason_error_string(e) : "does not load");
        ERR_clear_error();
        return TB_ECONFIG;
    }
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds it */
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
        return tls_failed(c, "TLS");
    unsigned char ip[16];
    bool literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
    if (literal) {
        X509_VERIFY_PARAM_set1_ip_asc(param, host);
    } else {
        SSL_set_tlsext_host_name(c->ssl, host);
        SSL_set1_host(c->ssl, host);
    }
    SSL_set_connect_state(c->ssl);
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int k = SSL_connect(c->ssl);
        if (k == 1)
            return 0;
        int rc = tls_wait(c, k, deadline, "TLS handshake");
        if (rc < 0)
            return rc;
    }
}

static int send_all(conn_t *c, const char *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t w;
        if (c->ssl) {
            ERR_clear_error();
            errno = 0;
            int k = SSL_write(c->ssl, p, (int)TB_MIN(n, (size_t)INT_MAX));
            if (k <= 0) {
                int rc = tls_wait(c, k, deadline, "TLS");
                if (rc < 0)
                    return rc;
                continue;
            }
            w = k;
        } else {
            w = send(c->fd, p, n, MSG_NOSIGNAL);
            if (w <= 0) {
                if (w < 0 && errno != EAGAIN && errno != EINTR)
                    return -errno;
                int rc = wait_fd(c->fd, POLLOUT, deadline);
                if (rc < 0)
                    return rc;
                continue;
            }
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(conn_t *c, tb_buf_t *raw, size_t max, uint64_t deadline)
{
    char tmp[16384];
    for (;;) {
        ssize_t r;
        if (c->ssl) {
            ERR_clear_error();
            errno = 0;
            int k = SSL_read(c->ssl, tmp, sizeof tmp);
            if (k <= 0) {
                if (SSL_get_error(c->ssl, k) == SSL_ERROR_ZERO_RETURN)
                    return 0; /* close_notify, or the end of the stream */
                int rc = tls_wait(c, k, deadline, "TLS");
                if (rc < 0)
                    return rc;
                continue;
            }
            r = k;
        } else {
            r = recv(c->fd, tmp, sizeof tmp, 0);
            if (r == 0)
                return 0;
            if (r < 0) {
                if (errno != EAGAIN && errno != EINTR)
                    return -errno;
                int rc = wait_fd(c->fd, POLLIN, deadline);
                if (rc < 0)
                    return rc;
                continue;
            }
        }
        if (raw->len + (size_t)r > max)
            return TB_EFULL;
        tb_buf_append(raw, tmp, (size_t)r);
    }
}

/* Splits a complete response into status and body. */
static int parse_response(const tb_buf_t *raw, int *status, tb_buf_t *body)
{
    const char *s = tb_buf_str(raw);
    if (raw->len < 12 || strncmp(s, "HTTP/1.", 7) != 0 || s[8] != ' ')
        return TB_EMALFORMED;
    int code = atoi(s + 9);
    if (code < 100 || code > 599)
        return TB_EMALFORMED;
    const char *end = strstr(s, "\r\n\r\n");
    if (!end)
        return TB_EMALFORMED;
    size_t head = (size_t)(end - s) + 4, blen = raw->len - head;
    for (const char *l = strstr(s, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, "Transfer-Encoding:", 18) == 0)
            return TB_EMALFORMED;
        if (strncasecmp(l + 2, "Content-Length:", 15) == 0) {
            size_t cl = strtoull(l + 17, NULL, 10);
            if (cl > blen)
                return TB_EMALFORMED; /* cut short */
            blen = cl;
        }
    }
    tb_buf_append(body, s + head, blen);
    *status = code;
    return 0;
}

int cli_http_get(const char *addr, const char *path, int timeout_ms, size_t max_body, int *status, tb_buf_t *body)
{
    return cli_http_get_auth(addr, path, NULL, timeout_ms, max_body, status, body);
}

int cli_http_get_auth(const char *addr, const char *path, const char *token, int timeout_ms, size_t max_body,
                      int *status, tb_buf_t *body)
{
    cli_http_req_t r = { .url = addr, .path = path, .token = token, .timeout_ms = timeout_ms, .max_body = max_body };
    return cli_http_fetch(&r, status, body, NULL, 0);
}

int cli_http_url(const char *url, bool *https, char *hostport, size_t len)
{
    /* "http://host:port/", "https://host:port" and "host:port" name the endpoint */
    const char *a = url;
    *https = false;
    if (strncmp(url, "https://", 8) == 0) {
        *https = true;
        a = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        a = url + 7;
    }
    size_t n = strcspn(a, "/");
    if (n == 0 || n >= len)
        return TB_ECONFIG;
    memcpy(hostport, a, n);
    hostport[n] = '\0';
    return 0;
}

int cli_http_fetch(const cli_http_req_t *r, int *status, tb_buf_t *body, char *why, size_t whylen)
{
    uint64_t deadline = tb_mono_ms() + (uint64_t)(r->timeout_ms > 0 ? r->timeout_ms : 1);
    char none[8];
    if (!why) {
        why = none;
        whylen = sizeof none;
    }
    why[0] = '\0';
    *status = 0;
    bool https;
    char hostport[300], host[256], port[16];
    if (cli_http_url(r->url, &https, hostport, sizeof hostport) < 0 ||
        split_hostport(hostport, host, sizeof host, port, sizeof port) < 0)
        return TB_ECONFIG;
    https = https || r->https;
    conn_t c = { .fd = -1, .why = why, .whylen = whylen };
    int rc = dial(host, port, deadline, &c.fd);
    if (rc < 0)
        return rc;
    if (https)
        rc = tls_start(&c, host, r, deadline);
    tb_buf_t req = TB_BUF_INIT, raw = TB_BUF_INIT;
    const char *method = r->method ? r->method : "GET";
    tb_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tributary/%s\r\nAccept: */*\r\nConnection: close\r\n",
                  method, r->path, hostport, TRIB_VERSION);
    if (strcmp(method, "POST") == 0)
        tb_buf_puts(&req, "Content-Length: 0\r\n");
    if (r->token)
        tb_buf_printf(&req, "Authorization: Bearer %s\r\n", r->token);
    tb_buf_puts(&req, "\r\n");
    if (rc == 0)
        rc = send_all(&c, req.data, req.len, deadline);
    if (rc == 0)
        rc = recv_all(&c, &raw, MAX_HEAD + r->max_body, deadline);
    if (c.ssl) {
        if (rc == 0)
            SSL_shutdown(c.ssl); /* best effort: the gateway is lingering for our FIN */
        SSL_free(c.ssl);
        ERR_clear_error();
    }
    close(c.fd);
    if (rc == 0)
        rc = parse_response(&raw, status, body);
    explicit_bzero(req.data, req.len); /* it held the token */
    tb_buf_free(&req);
    tb_buf_free(&raw);
    return rc;
}
