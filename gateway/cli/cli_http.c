/*
 * cli_http.c: the smallest blocking HTTP/1.1 GET, for `tributary status`
 * (a CLI process, never the event loop). One deadline covers connect, send
 * and receive, enforced with non-blocking sockets and poll(2), so an
 * endpoint that accepts and then says nothing costs the operator at most
 * the timeout. "Connection: close" lets the body run to EOF; Content-Length
 * is honoured when present. Chunked responses are not needed (our server
 * never sends them) and are refused as malformed.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
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

static int dial(const char *addr, uint64_t deadline, int *fd)
{
    char host[256], port[16];
    const char *a = addr;
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
    if (hl == 0 || hl >= sizeof host || pl == 0 || pl >= sizeof port)
        return TB_ECONFIG;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, colon + 1, pl);
    port[pl] = '\0';
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

static int send_all(int fd, const char *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(fd, POLLOUT, deadline);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int recv_all(int fd, tb_buf_t *raw, size_t max, uint64_t deadline)
{
    char tmp[16384];
    for (;;) {
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r == 0)
            return 0;
        if (r > 0) {
            if (raw->len + (size_t)r > max)
                return TB_EFULL;
            tb_buf_append(raw, tmp, (size_t)r);
            continue;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(fd, POLLIN, deadline);
        if (rc < 0)
            return rc;
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
    uint64_t deadline = tb_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    *status = 0;
    /* "http://host:port/" and "host:port" both name the endpoint */
    const char *a = strncmp(addr, "http://", 7) == 0 ? addr + 7 : addr;
    char hostport[300];
    size_t n = strcspn(a, "/");
    if (n == 0 || n >= sizeof hostport)
        return TB_ECONFIG;
    memcpy(hostport, a, n);
    hostport[n] = '\0';
    int fd = -1;
    int rc = dial(hostport, deadline, &fd);
    if (rc < 0)
        return rc;
    tb_buf_t req = TB_BUF_INIT, raw = TB_BUF_INIT;
    tb_buf_printf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tributary/%s\r\nAccept: */*\r\nConnection: close\r\n",
                  path, hostport, TRIB_VERSION);
    if (token)
        tb_buf_printf(&req, "Authorization: Bearer %s\r\n", token);
    tb_buf_puts(&req, "\r\n");
    rc = send_all(fd, req.data, req.len, deadline);
    if (rc == 0)
        rc = recv_all(fd, &raw, MAX_HEAD + max_body, deadline);
    close(fd);
    if (rc == 0)
        rc = parse_response(&raw, status, body);
    explicit_bzero(req.data, req.len); /* it held the token */
    tb_buf_free(&req);
    tb_buf_free(&raw);
    return rc;
}
