/*
 * `tributary status`'s client over HTTPS (cli_http_fetch) against the
 * real HTTP server with TLS (helper_http.c): the certificate verified
 * against --cafile and the address's IP, an untrusted one refused with
 * the reason, TLS against a plain endpoint failing cleanly, a --cafile that
 * does not load named, and the URL's scheme read.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/gateway/tls/helper_cert.h"
#include "base/base.h"
#include "gateway/cli/cli.h"
#include "../http/helper_http.h"

TestSuite(cli_https, .timeout = 60);

static char dir[64], cert[128], key[128], other[128], other_key[128];

static void certs(void)
{
    snprintf(dir, sizeof dir, "/tmp/tb_clihttps_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    hc_make_cert(dir, "server", "gw", cert, key);
    hc_make_cert(dir, "other", "someone-else", other, other_key);
}

static void rm_certs(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static int fetch(int port, const char *scheme, const char *cafile, int *status, tb_buf_t *body, char *why,
                 size_t whylen)
{
    char url[64];
    snprintf(url, sizeof url, "%s127.0.0.1:%d", scheme, port);
    cli_http_req_t r = { .url = url, .path = "/a", .cafile = cafile, .timeout_ms = 3000, .max_body = 1024 };
    return cli_http_fetch(&r, status, body, why, whylen);
}

Test(cli_https, gets_the_body_over_tls_trusting_its_cafile, .init = certs, .fini = rm_certs)
{
    th_t t;
    th_start(&t);
    th_server_tls(&t, NULL, th_tls_ctx(cert, key));
    int status;
    tb_buf_t body = TB_BUF_INIT;
    char why[256];
    cr_assert_eq(fetch(t.port, "https://", cert, &status, &body, why, sizeof why), 0, "%s", why);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(tb_buf_str(&body), "A");
    tb_buf_free(&body);
    th_stop(&t);
}

Test(cli_https, an_untrusted_certificate_is_refused_with_why, .init = certs, .fini = rm_certs)
{
    th_t t;
    th_start(&t);
    th_server_tls(&t, NULL, th_tls_ctx(cert, key));
    int status;
    tb_buf_t body = TB_BUF_INIT;
    char why[256];
    cr_assert_eq(fetch(t.port, "https://", other, &status, &body, why, sizeof why), TB_EPROTO);
    cr_assert(strstr(why, "certificate"), "%s", why);
    tb_buf_free(&body);
    th_stop(&t);
}

Test(cli_https, tls_against_a_plain_endpoint_fails_cleanly, .init = certs, .fini = rm_certs)
{
    th_t t;
    th_start(&t);
    th_server(&t, NULL);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    char why[256];
    cr_assert_eq(fetch(t.port, "https://", cert, &status, &body, why, sizeof why), TB_EPROTO);
    cr_assert(strstr(why, "TLS handshake"), "%s", why);
    tb_buf_free(&body);
    th_stop(&t);
}

Test(cli_https, a_cafile_that_does_not_load_is_named, .init = certs, .fini = rm_certs)
{
    th_t t;
    th_start(&t);
    th_server_tls(&t, NULL, th_tls_ctx(cert, key));
    int status;
    tb_buf_t body = TB_BUF_INIT;
    char why[256];
    cr_assert_eq(fetch(t.port, "https://", key, &status, &body, why, sizeof why), TB_ECONFIG);
    cr_assert(strstr(why, "--cafile") && strstr(why, "server.key"), "%s", why);
    tb_buf_free(&body);
    th_stop(&t);
}

Test(cli_https, the_url_says_the_scheme)
{
    bool https;
    char hp[64];
    cr_assert_eq(cli_http_url("https://127.0.0.1:9443/stats", &https, hp, sizeof hp), 0);
    cr_assert(https);
    cr_assert_str_eq(hp, "127.0.0.1:9443");
    cr_assert_eq(cli_http_url("http://[::1]:9090", &https, hp, sizeof hp), 0);
    cr_assert(!https);
    cr_assert_str_eq(hp, "[::1]:9090");
    cr_assert_eq(cli_http_url("127.0.0.1:9090", &https, hp, sizeof hp), 0);
    cr_assert(!https);
    cr_assert_eq(cli_http_url("https:///stats", &https, hp, sizeof hp), TB_ECONFIG);
}
