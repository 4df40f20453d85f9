/* Tests for gateway/http_parse.c: finding the end of a request head and parsing it. */
#include <criterion/criterion.h>
#include <string.h>

#include "gateway/http/http.h"

/* Parses a copy of s (the parser writes into its buffer). */
static int parse(const char *s, http_req_t *req, char *copy, size_t n)
{
    snprintf(copy, n, "%s", s);
    size_t end = http_head_end(copy, strlen(copy), 0);
    cr_assert_gt(end, 0, "no end of head in %s", s);
    return http_parse(copy, end, req);
}

#define PARSE(s) (rc = parse((s), &req, buf, sizeof buf))

Test(http_parse, get_splits_path_and_query)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET /stats?pretty&x=1 HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_GET);
    cr_assert_str_eq(req.path, "/stats");
    cr_assert_str_eq(req.query, "pretty&x=1");
    cr_assert_eq(req.minor, 1);
}

Test(http_parse, head_and_other_methods_are_told_apart)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_HEAD);
    cr_assert_eq(PARSE("DELETE / HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_OTHER);
    cr_assert_eq(PARSE("POST /admin/reload?wait_ms=5 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_POST);
    cr_assert_str_eq(req.path, "/admin/reload");
    cr_assert_str_eq(req.query, "wait_ms=5");
    cr_assert_eq(PARSE("POSTS / HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_OTHER);
    cr_assert_eq(PARSE("post / HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_eq(req.method, HTTP_OTHER);
    cr_assert_eq(PARSE("get / HTTP/1.1\r\nHost: h\r\n\r\n"), 0); /* methods are case-sensitive */
    cr_assert_eq(req.method, HTTP_OTHER);
}

Test(http_parse, http11_keeps_alive_unless_connection_close)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert(req.keep_alive);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nConnection: TE, Close\r\n\r\n"), 0);
    cr_assert_not(req.keep_alive);
}

Test(http_parse, http10_closes_unless_connection_keep_alive)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.0\r\n\r\n"), 0);
    cr_assert_not(req.keep_alive);
    cr_assert_eq(PARSE("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 0);
    cr_assert(req.keep_alive);
}

Test(http_parse, bare_lf_line_endings_are_accepted)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET /healthz HTTP/1.1\nHost: h\n\n"), 0);
    cr_assert_str_eq(req.path, "/healthz");
}

Test(http_parse, leading_empty_lines_are_skipped)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("\r\n\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_str_eq(req.path, "/a");
}

Test(http_parse, header_values_are_trimmed_and_names_case_insensitive)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nhOsT:h\r\nCONNECTION:   close  \r\n\r\n"), 0);
    cr_assert_not(req.keep_alive);
}

Test(http_parse, malformed_heads_are_400)
{
    const char *bad[] = {
        "GET / HTTP/1.1\r\nHost : h\r\n\r\n",             /* space before the colon */
        "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",   /* obs-fold */
        "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n", /* control character */
        "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n",
        "GET /  HTTP/1.1\r\nHost: h\r\n\r\n",             /* two spaces */
        "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n",      /* absolute form */
        "GET * HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
        "GET / HTTX/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.10\r\nHost: h\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        " GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_req_t req;
        char buf[512];
        cr_assert_eq(parse(bad[i], &req, buf, sizeof buf), 400, "case %zu", i);
    }
}

Test(http_parse, host_is_required_once_on_http11)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.0\r\n\r\n"), 0);
}

Test(http_parse, content_length_zero_is_no_body)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), 0);
}

Test(http_parse, a_body_is_413)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n"), 413);
    cr_assert_eq(PARSE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999\r\n\r\n"), 413);
    cr_assert_eq(PARSE("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n"), 413, "POST is bodiless too");
}

Test(http_parse, bad_or_conflicting_content_length_is_400)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1234567890123456789012\r\n\r\n"), 400);
}

Test(http_parse, transfer_encoding_is_400)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    cr_assert_eq(PARSE("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n"), 400);
}

Test(http_parse, other_major_versions_are_505)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
    cr_assert_eq(PARSE("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 505);
    cr_assert_eq(PARSE("GET / HTTP/0.9\r\nHost: h\r\n\r\n"), 505);
}

Test(http_parse, head_end_waits_for_the_blank_line)
{
    const char *s = "GET / HTTP/1.1\r\nHost: h\r\n";
    cr_assert_eq(http_head_end(s, strlen(s), 0), 0);
    cr_assert_eq(http_head_end("\r\n\r\n", 4, 0), 0); /* only empty lines: no head yet */
}

Test(http_parse, head_end_points_past_the_blank_line_before_a_pipelined_request)
{
    const char *s = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\n";
    cr_assert_eq(http_head_end(s, strlen(s), 0), strlen("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"));
}

Test(http_parse, head_end_fed_byte_by_byte_finds_the_same_end)
{
    const char *variants[] = { "GET / HTTP/1.1\r\nHost: h\r\n\r\nrest", "GET / HTTP/1.1\nHost: h\n\nrest",
                               "GET / HTTP/1.1\nHost: h\n\r\nrest" };
    for (size_t v = 0; v < 3; v++) {
        const char *s = variants[v];
        size_t whole = http_head_end(s, strlen(s), 0), got = 0;
        for (size_t len = 1; len <= strlen(s) && !got; len++)
            got = http_head_end(s, len, len - 1);
        cr_assert_eq(got, whole, "variant %zu: %zu vs %zu", v, got, whole);
    }
}

Test(http_parse, authorization_is_kept_and_a_second_one_refused)
{
    http_req_t req;
    char buf[512];
    int rc;
    cr_assert_eq(PARSE("GET /stats HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
    cr_assert_str_eq(req.authorization, "", "absent: empty");
    cr_assert_eq(PARSE("GET /stats HTTP/1.1\r\nHost: h\r\nauthorization:  Bearer abc \r\n\r\n"), 0);
    cr_assert_str_eq(req.authorization, "Bearer abc", "value without the blanks around it");
    cr_assert_eq(PARSE("GET /stats HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n"),
                 400, "two tokens: which one would be checked?");
}
