/*
 * Tests for gateway/http_server.c and http_conn.c: routing, methods, HEAD,
 * keep-alive and pipelining, the head limit, refused bodies, malformed
 * requests. The deadlines, the connection cap, slow readers and the drain
 * are in test_http_limits.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_http.h"

static th_t T;

static void setup(void)
{
    th_start(&T);
    th_server(&T, NULL);
}

static void teardown(void)
{
    th_stop(&T);
}

TestSuite(http_server, .init = setup, .fini = teardown, .timeout = 30);

static int get_on(cl_t *c, const char *path, cl_resp_t *r)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    cl_send(c, req);
    return cl_read(c, r, false);
}

Test(http_server, routes_dispatch_by_exact_path)
{
    char body[64];
    cr_assert_eq(cl_get(T.port, "/a", body, sizeof body), 200);
    cr_assert_str_eq(body, "A");
    cr_assert_eq(cl_get(T.port, "/b", body, sizeof body), 200);
    cr_assert_str_eq(body, "B");
}

Test(http_server, query_string_does_not_change_the_route)
{
    char body[64];
    cr_assert_eq(cl_get(T.port, "/a?x=1&y", body, sizeof body), 200);
    cr_assert_str_eq(body, "A");
}

Test(http_server, unknown_path_is_404)
{
    cr_assert_eq(cl_get(T.port, "/nope", NULL, 0), 404);
    cr_assert_eq(cl_get(T.port, "/a/", NULL, 0), 404);
}

Test(http_server, post_is_405_and_names_the_allowed_methods)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 405);
    char v[64];
    cr_assert_str_eq(cl_header(&r, "Allow", v, sizeof v), "GET, HEAD");
    cl_resp_free(&r);
    cl_close(c);
}

/* One request on a new connection: status, Allow and body. */
static int ask(const char *request, char *allow, size_t n, char *body, size_t bn)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, request);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, strncmp(request, "HEAD ", 5) == 0), 0, "%s", request);
    int status = r.status;
    cl_header(&r, "Allow", allow, n);
    snprintf(body, bn, "%s", r.body ? r.body : "");
    cl_resp_free(&r);
    cl_close(c);
    return status;
}

Test(http_server, post_routes_answer_post_and_405_the_rest)
{
    char allow[64], body[128];
    cr_assert_eq(ask("POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", allow, sizeof allow, body,
                     sizeof body), 200);
    cr_assert_str_eq(body, "P");
    cr_assert_eq(ask("POST /p?wait_ms=10 HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body),
                 200, "no Content-Length at all: bodiless");
    cr_assert_eq(ask("GET /p HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 405);
    cr_assert_str_eq(allow, "POST");
    cr_assert_str_eq(body, "method not allowed: this endpoint serves POST\n");
    cr_assert_eq(ask("HEAD /p HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 405);
    cr_assert_str_eq(allow, "POST");
    cr_assert_eq(ask("POST /nope HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 404);
    cr_assert_eq(ask("DELETE /nope HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 405,
                 "another method is 405 everywhere, as before");
    cr_assert_str_eq(allow, "GET, HEAD");
}

Test(http_server, a_path_may_have_a_get_and_a_post_route)
{
    char allow[64], body[128];
    cr_assert_eq(ask("GET /both HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 200);
    cr_assert_str_eq(body, "G");
    cr_assert_eq(ask("POST /both HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 200);
    cr_assert_str_eq(body, "W");
    cr_assert_eq(ask("PUT /both HTTP/1.1\r\nHost: t\r\n\r\n", allow, sizeof allow, body, sizeof body), 405);
    cr_assert_str_eq(allow, "GET, HEAD, POST");
    cr_assert_str_eq(body, "method not allowed: this endpoint serves GET, HEAD and POST\n");
}

Test(http_server, a_post_with_a_body_is_413_and_closed)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 413);
    cl_resp_free(&r);
    cr_assert(cl_eof(c));
    cl_close(c);
}

Test(http_server, head_sends_the_get_headers_and_no_body)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, true), 0);
    cr_assert_eq(r.status, 200);
    char v[64];
    cr_assert_str_eq(cl_header(&r, "Content-Length", v, sizeof v), "1");
    cl_resp_free(&r);
    /* had a body byte been sent, this response would start with "A" and fail to parse */
    cr_assert_eq(get_on(c, "/b", &r), 0);
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, keep_alive_serves_many_requests_on_one_connection)
{
    cl_t *c = cl_open(T.port, 0);
    for (int i = 0; i < 20; i++) {
        cl_resp_t r;
        cr_assert_eq(get_on(c, i % 2 ? "/a" : "/b", &r), 0, "request %d", i);
        cr_assert_str_eq(r.body, i % 2 ? "A" : "B");
        cl_resp_free(&r);
    }
    cr_assert_eq(th_stats(&T).accepted, 1);
    cl_close(c);
}

Test(http_server, connection_close_is_honoured)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    char v[64];
    cr_assert_str_eq(cl_header(&r, "Connection", v, sizeof v), "close");
    cr_assert(cl_eof(c));
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, http10_closes_unless_asked_to_keep_alive)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.0\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert(cl_eof(c));
    cl_resp_free(&r);
    cl_close(c);

    c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cr_assert_eq(cl_read(c, &r, false), 0);
    char v[64];
    cr_assert_str_eq(cl_header(&r, "Connection", v, sizeof v), "keep-alive");
    cl_resp_free(&r);
    cl_send(c, "GET /b HTTP/1.0\r\n\r\n");
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, pipelined_requests_are_answered_in_order)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    const char *want[] = { "A", "B", NULL, "A" };
    for (int i = 0; i < 4; i++) {
        cl_resp_t r;
        cr_assert_eq(cl_read(c, &r, false), 0, "response %d", i);
        if (want[i])
            cr_assert_str_eq(r.body, want[i]);
        else
            cr_assert_eq(r.status, 404);
        cl_resp_free(&r);
    }
    cl_close(c);
}

Test(http_server, responses_carry_length_type_and_no_store)
{
    cl_t *c = cl_open(T.port, 0);
    cl_resp_t r;
    cr_assert_eq(get_on(c, "/a", &r), 0);
    char v[128];
    cr_assert_str_eq(cl_header(&r, "Content-Type", v, sizeof v), "text/plain; charset=utf-8");
    cr_assert_str_eq(cl_header(&r, "Cache-Control", v, sizeof v), "no-store");
    cr_assert_neq(cl_header(&r, "Date", v, sizeof v)[0], '\0');
    cl_resp_free(&r);
    cl_close(c);
}

/* A head of exactly `total` bytes: request line, Host, filler header, blank line. */
static char *head_of(size_t total)
{
    const char *pre = "GET /a HTTP/1.1\r\nHost: t\r\nX-Fill: ";
    char *s = malloc(total + 1);
    size_t p = strlen(pre);
    memcpy(s, pre, p);
    memset(s + p, 'f', total - p - 4);
    memcpy(s + total - 4, "\r\n\r\n", 4);
    s[total] = '\0';
    return s;
}

Test(http_server, head_of_exactly_the_limit_is_served)
{
    char *h = head_of(8192);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, h);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 200);
    cl_resp_free(&r);
    cl_close(c);
    free(h);
}

Test(http_server, head_over_the_limit_gets_431_and_close)
{
    char *h = head_of(8193);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, h);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 431);
    cr_assert(cl_eof(c));
    cl_resp_free(&r);
    cl_close(c);
    free(h);
}

Test(http_server, endless_header_stream_is_cut_at_the_limit)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n");
    char line[100];
    memset(line, 'x', sizeof line);
    memcpy(line + sizeof line - 2, "\r\n", 2);
    line[0] = 'X', line[1] = ':';
    for (int i = 0; i < 90; i++) /* 9000 bytes of valid header lines, no end */
        cl_sendn(c, line, sizeof line);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 431);
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, request_with_a_body_gets_413_and_close)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 413);
    cr_assert(cl_eof(c));
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, chunked_request_gets_400_and_close)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 400);
    cr_assert(cl_eof(c));
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, malformed_request_line_gets_400)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GARBAGE\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 400);
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, http11_without_host_gets_400)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/1.1\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 400);
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, http2_gets_505)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /a HTTP/2.0\r\nHost: t\r\n\r\n");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 505);
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_server, handler_returning_an_invalid_status_gives_500)
{
    char body[64];
    cr_assert_eq(cl_get(T.port, "/bad", body, sizeof body), 500);
    cr_assert_null(strstr(body, "should not be sent"));
}

Test(http_server, counts_responses_by_status_code)
{
    cl_get(T.port, "/a", NULL, 0);
    cl_get(T.port, "/nope", NULL, 0);
    cl_get(T.port, "/nope", NULL, 0);
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.by_code[metrics_http_code_index(200)], 1);
    cr_assert_eq(st.by_code[metrics_http_code_index(404)], 2);
    cr_assert_eq(st.responses, 3);
}
