/*
 * Tests for gateway/cli/cli_status_render.c (the `tributary status` view) and
 * gateway/cli/cli_http.c (its blocking GET with one deadline).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "gateway/cli/cli.h"
#include "unit/gateway/http/helper_http.h"

static const char DOC[] =
    "{\"version\":\"0.1.0\",\"edge\":\"e1\",\"uptime_seconds\":3725.2,\"healthy\":true,\"unhealthy_reason\":null,"
    "\"ready\":false,\"not_ready_reason\":\"mqtt listener not started\",\"invariant_ok\":true,"
    "\"cluster\":{\"state\":\"unreachable\",\"up\":false},\"connections\":{\"mqtt\":12,\"http\":1},"
    "\"topics\":["
    "{\"topic\":\"/e1/telemetry\",\"state\":\"catching_up\",\"durability\":\"spilling\",\"queued\":1500,\"dropped\":0,"
    "\"rejected\":{\"schema_invalid\":3,\"payload_too_large\":1},\"oldest_unreplicated_age_seconds\":95.5,"
    "\"invariant_ok\":true},"
    "{\"topic\":\"/e1/e\",\"state\":\"idle\",\"queued\":0,\"dropped\":7,\"rejected\":{},"
    "\"oldest_unreplicated_age_seconds\":0,\"invariant_ok\":false}]}";

static char *render(const char *text, int *rc)
{
    json_t *doc = json_loads(text, 0, NULL);
    cr_assert_not_null(doc);
    static tb_buf_t out = TB_BUF_INIT;
    tb_buf_reset(&out);
    *rc = cli_status_render(doc, &out);
    json_decref(doc);
    return (char *)tb_buf_str(&out);
}

Test(cli_status, view_has_a_header_line_and_one_line_per_topic)
{
    int rc;
    const char *s = render(DOC, &rc);
    cr_assert_eq(rc, 0);
    cr_assert_str_eq(s,
        "tributary 0.1.0  edge e1  up 1h02m  NOT READY (mqtt listener not started)  healthy  cluster unreachable"
        "  mqtt 12  http 1  invariant ok\n"
        "TOPIC          STATE        DURABILITY    QUEUED  LAG AGE   DROPPED  REJECTED\n"
        "/e1/telemetry  catching_up  spilling        1500    1m35s         0         4\n"
        "/e1/e          idle         ?                  0     0.0s         7         0  INVARIANT BROKEN\n");
}

Test(cli_status, a_line_names_each_listener_its_connections_and_denials)
{
    int rc;
    const char *s = render("{\"topics\":[],\"listeners\":["
                           "{\"listener\":\"0.0.0.0:1883\",\"tls\":false,\"connections\":2,\"publish_denied\":0},"
                           "{\"listener\":\"0.0.0.0:8883\",\"tls\":true,\"connections\":36,\"publish_denied\":4}]}",
                           &rc);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(s, "\nlisteners  0.0.0.0:1883 2 conns  0.0.0.0:8883 tls 36 conns 4 denied\n"), "%s", s);
}

Test(cli_status, dropped_column_shows_what_the_log_lost_over_its_life)
{
    int rc;
    const char *s = render("{\"ready\":true,\"topics\":[{\"topic\":\"/e1/t\",\"state\":\"idle\",\"queued\":0,"
                           "\"dropped\":2,\"wal_dropped_total\":40,\"rejected\":{},"
                           "\"oldest_unreplicated_age_seconds\":0,\"invariant_ok\":true}]}",
                           &rc);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(s, "/e1/t  idle         ?                  0     0.0s        40         0\n"), "%s", s);
}

Test(cli_status, dropped_column_counts_the_age_drops_too)
{
    int rc;
    const char *s = render("{\"ready\":true,\"topics\":[{\"topic\":\"/e1/t\",\"state\":\"idle\",\"queued\":0,"
                           "\"dropped\":2,\"wal_dropped_total\":40,\"wal_dropped_age_total\":7,\"rejected\":{},"
                           "\"oldest_unreplicated_age_seconds\":0,\"invariant_ok\":true}]}",
                           &rc);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(s, "/e1/t  idle         ?                  0     0.0s        47         0\n"), "%s", s);
}

Test(cli_status, durability_column_shows_where_each_topics_messages_are)
{
    int rc;
    const char *s = render("{\"ready\":true,\"topics\":["
                           "{\"topic\":\"/e1/a\",\"state\":\"idle\",\"durability\":\"log\",\"queued\":0},"
                           "{\"topic\":\"/e1/b\",\"state\":\"idle\",\"durability\":\"memory\",\"queued\":0},"
                           "{\"topic\":\"/e1/c\",\"state\":\"idle\",\"durability\":\"draining\",\"queued\":3}]}",
                           &rc);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(s, "\n/e1/a  idle         log                0"), "%s", s);
    cr_assert_not_null(strstr(s, "\n/e1/b  idle         memory             0"), "%s", s);
    cr_assert_not_null(strstr(s, "\n/e1/c  idle         draining           3"), "%s", s);
}

Test(cli_status, a_broken_overall_invariant_is_shouted)
{
    int rc;
    const char *s = render("{\"invariant_ok\":false,\"ready\":true,\"topics\":[]}", &rc);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(s, "invariant BROKEN\n"), "%s", s);
    cr_assert_not_null(strstr(s, "no upstream topics\n"), "%s", s);
}

Test(cli_status, a_document_that_is_not_stats_is_refused)
{
    int rc;
    render("{\"hello\":1}", &rc);
    cr_assert_eq(rc, TB_EMALFORMED);
    render("[1,2]", &rc);
    cr_assert_eq(rc, TB_EMALFORMED);
}

/* ---- the client --------------------------------------------------------- */

Test(cli_status, client_gets_the_status_and_body)
{
    th_t t;
    th_start(&t);
    th_server(&t, NULL);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", t.port);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    cr_assert_eq(cli_http_get(addr, "/a", 3000, 1024, &status, &body), 0);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(tb_buf_str(&body), "A");
    tb_buf_reset(&body);
    snprintf(addr, sizeof addr, "http://127.0.0.1:%d/", t.port);
    cr_assert_eq(cli_http_get(addr, "/nope", 3000, 1024, &status, &body), 0);
    cr_assert_eq(status, 404);
    tb_buf_free(&body);
    th_stop(&t);
}

Test(cli_status, client_refuses_a_body_over_its_limit)
{
    th_t t;
    th_start(&t);
    th_big_size = 100000;
    th_server(&t, NULL);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", t.port);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    cr_assert_eq(cli_http_get(addr, "/big", 3000, 1000, &status, &body), TB_EFULL);
    tb_buf_free(&body);
    th_stop(&t);
}

/* A socket that listens and never accepts: connect succeeds (the kernel's backlog), nothing ever answers. */
static int silent_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 4), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

Test(cli_status, client_gives_up_on_a_silent_server_at_its_deadline)
{
    int port, fd = silent_listener(&port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    uint64_t t0 = tb_mono_ms();
    cr_assert_eq(cli_http_get(addr, "/stats", 300, 1024, &status, &body), -ETIMEDOUT);
    uint64_t elapsed = tb_mono_ms() - t0;
    cr_assert(elapsed >= 300 && elapsed < 800, "gave up after %llu ms", (unsigned long long)elapsed);
    close(fd);
    tb_buf_free(&body);
}

Test(cli_status, client_reports_a_refused_connection)
{
    int port, fd = silent_listener(&port);
    close(fd); /* nothing listens there now */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    cr_assert_eq(cli_http_get(addr, "/stats", 1000, 1024, &status, &body), -ECONNREFUSED);
    cr_assert_eq(cli_http_get("nonsense", "/stats", 1000, 1024, &status, &body), TB_ECONFIG);
    tb_buf_free(&body);
}
