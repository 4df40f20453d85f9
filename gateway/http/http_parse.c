/*
 * http_parse.c: the HTTP/1.x request head, parsed from bytes a stranger
 * sent. Pure functions (no I/O, no allocation) so they can be fuzzed
 * (tests/fuzz/fuzz_http_request.c).
 *
 * What is accepted (RFC 9112, strict where leniency is a known smuggling
 * or confusion risk):
 *   request-line = method SP origin-form SP "HTTP/1." DIGIT, then CRLF or
 *                  a bare LF; leading empty lines are skipped (§2.2)
 *   header-field = token ":" OWS value OWS; no space before the colon, no
 *                  obs-fold continuation lines, no control characters
 *   Host is required on HTTP/1.1 (§3.2) and may appear once.
 * Bodies are refused (POST too): the endpoints take none, and not reading one means
 * there is no body framing to get wrong. Content-Length must be digits
 * (repeats must agree); any value > 0 is 413. Transfer-Encoding of any kind
 * is 400. The caller closes the connection after either.
 */
#include "gateway/http/http.h"

#include <string.h>
#include <strings.h>

size_t http_head_end(const char *buf, size_t len, size_t from)
{
    size_t p0 = 0;
    while (p0 < len && (buf[p0] == '\r' || buf[p0] == '\n'))
        p0++;
    size_t i = from >= 2 ? from - 2 : 0;
    if (i < p0)
        i = p0;
    for (; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Cuts the line starting at *p (inside [*p, end)), strips CR, returns it NUL-terminated; NULL at end. */
static char *next_line(char **p, char *end, size_t *linelen)
{
    char *s = *p;
    if (s >= end)
        return NULL;
    char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return NULL;
    *p = nl + 1;
    if (nl > s && nl[-1] == '\r')
        nl--;
    *nl = '\0';
    *linelen = (size_t)(nl - s);
    return s;
}

static int parse_request_line(char *line, size_t n, http_req_t *req)
{
    char *sp1 = memchr(line, ' ', n);
    if (!sp1 || sp1 == line)
        return 400;
    for (char *c = line; c < sp1; c++)
        if (!is_tchar((unsigned char)*c))
            return 400;
    char *target = sp1 + 1;
    char *sp2 = memchr(target, ' ', n - (size_t)(target - line));
    if (!sp2 || sp2 == target || *target != '/')
        return 400;
    for (char *c = target; c < sp2; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            return 400;
    const char *ver = sp2 + 1;
    size_t vlen = n - (size_t)(ver - line);
    if (vlen != 8 || strncmp(ver, "HTTP/", 5) != 0 || ver[6] != '.' || ver[5] < '0' || ver[5] > '9' ||
        ver[7] < '0' || ver[7] > '9')
        return 400;
    if (ver[5] != '1' || ver[7] > '1')
        return 505;
    req->minor = ver[7] - '0';

    size_t mlen = (size_t)(sp1 - line);
    if (mlen == 3 && memcmp(line, "GET", 3) == 0)
        req->method = HTTP_GET;
    else if (mlen == 4 && memcmp(line, "HEAD", 4) == 0)
        req->method = HTTP_HEAD;
    else if (mlen == 4 && memcmp(line, "POST", 4) == 0)
        req->method = HTTP_POST; /* bodiless, as every request here */
    else
        req->method = HTTP_OTHER;

    *sp2 = '\0';
    char *q = memchr(target, '?', (size_t)(sp2 - target));
    if (q) {
        *q = '\0';
        req->query = q + 1;
    } else {
        req->query = "";
    }
    req->path = target;
    return 0;
}

/* Applies the comma-separated tokens of a Connection header. */
static void connection_tokens(const char *v, bool *close, bool *keep)
{
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        size_t n = strcspn(v, " \t,");
        if (n == 5 && strncasecmp(v, "close", 5) == 0)
            *close = true;
        else if (n == 10 && strncasecmp(v, "keep-alive", 10) == 0)
            *keep = true;
        v += n;
    }
}

int http_parse(char *buf, size_t len, http_req_t *req)
{
    memset(req, 0, sizeof *req);
    char *p = buf, *end = buf + len;
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    size_t n;
    char *line = next_line(&p, end, &n);
    if (!line)
        return 400;
    int rc = parse_request_line(line, n, req);
    if (rc)
        return rc;

    int hosts = 0, auths = 0;
    req->authorization = "";
    req->peer = "";
    bool te = false, close = false, keep = false, have_cl = false;
    unsigned long long cl = 0;
    while ((line = next_line(&p, end, &n)) && n > 0) {
        if (line[0] == ' ' || line[0] == '\t')
            return 400; /* obs-fold */
        char *colon = memchr(line, ':', n);
        if (!colon || colon == line)
            return 400;
        for (char *c = line; c < colon; c++)
            if (!is_tchar((unsigned char)*c))
                return 400; /* includes a space before the colon */
        char *v = colon + 1, *vend = line + n;
        for (char *c = v; c < vend; c++)
            if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                return 400;
        while (v < vend && (*v == ' ' || *v == '\t'))
            v++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
            *--vend = '\0';
        size_t nlen = (size_t)(colon - line);
        if (nlen == 4 && strncasecmp(line, "host", 4) == 0) {
            hosts++;
        } else if (nlen == 13 && strncasecmp(line, "authorization", 13) == 0) {
            auths++;
            req->authorization = v; /* NUL-terminated: next_line ends every line with one */
        } else if (nlen == 17 && strncasecmp(line, "transfer-encoding", 17) == 0) {
            te = true;
        } else if (nlen == 10 && strncasecmp(line, "connection", 10) == 0) {
            connection_tokens(v, &close, &keep);
        } else if (nlen == 14 && strncasecmp(line, "content-length", 14) == 0) {
            if (v == vend || vend - v > 18)
                return 400;
            unsigned long long x = 0;
            for (char *c = v; c < vend; c++) {
                if (*c < '0' || *c > '9')
                    return 400;
                x = x * 10 + (unsigned long long)(*c - '0');
            }
            if (have_cl && x != cl)
                return 400;
            have_cl = true;
            cl = x;
        }
    }
    if (!line)
        return 400; /* no blank line: not a complete head */
    if (te)
        return 400;
    if (cl > 0)
        return 413;
    if (hosts > 1 || (req->minor == 1 && hosts == 0) || auths > 1)
        return 400;
    req->keep_alive = req->minor == 1 ? !close : (keep && !close);
    return 0;
}

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 401: return "Unauthorized";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* The value of key in a query ("a=1&b=2"): true and *out when present and a decimal number. */
bool http_query_u64(const char *query, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *p = query; p && *p;) {
        const char *end = strchr(p, '&');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            uint64_t v = 0;
            size_t i = kl + 1;
            if (i == n)
                return false;
            for (; i < n; i++) {
                if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
                    return false;
                v = v * 10 + (uint64_t)(p[i] - '0');
            }
            *out = v;
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}
