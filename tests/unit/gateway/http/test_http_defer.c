/*
 * Tests for deferred answers (http_defer, http_pending_answer: http.h):
 * the answer is sent when the handler gives it, the connection goes on
 * serving after it; a client that closes first, an answer deadline, a
 * drain and the cap leave the pending valid and free it exactly once (the
 * ASan build checks the "exactly once").
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_http.h"

static th_t T;

static void start(uint64_t answer_timeout_ms)
{
    th_npending = 0;
    th_start(&T);
    http_opts_t o;
    http_opts_default(&o);
    if (answer_timeout_ms)
        o.answer_timeout_ms = answer_timeout_ms;
    th_server(&T, &o);
}

static void teardown(void)
{
    th_stop(&T);
}

TestSuite(http_defer, .fini = teardown, .timeout = 30);

static bool pending_is(th_t *t, void *arg)
{
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.pending == *(unsigned *)arg;
}

static bool no_conns(th_t *t, void *arg)
{
    (void)arg;
    http_stats_t st;
    http_get_stats(t->srv, &st);
    return st.conns == 0;
}

static cl_t *ask_later(void)
{
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\n");
    return c;
}

Test(http_defer, the_answer_is_sent_when_given_and_the_connection_goes_on)
{
    start(0);
    cl_t *c = ask_later();
    unsigned one = 1;
    cr_assert(th_wait_until(&T, pending_is, &one, 5000));
    cr_assert_not(th_answer(&T, 0, "L"));
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "L");
    cl_resp_free(&r);
    /* kept alive: the next request on it is read again */
    cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_str_eq(r.body, "A");
    cl_resp_free(&r);
    cl_close(c);
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.pending, 0);
    cr_assert_eq(st.deferred, 1);
}

Test(http_defer, a_pipelined_request_waits_behind_the_deferred_one)
{
    start(0);
    cl_t *c = cl_open(T.port, 0);
    cl_send(c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    unsigned one = 1;
    cr_assert(th_wait_until(&T, pending_is, &one, 5000));
    th_answer(&T, 0, "first");
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_str_eq(r.body, "first");
    cl_resp_free(&r);
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_str_eq(r.body, "B");
    cl_resp_free(&r);
    cl_close(c);
}

Test(http_defer, a_client_that_closes_before_the_answer_is_safe)
{
    start(0);
    cl_t *c = ask_later();
    unsigned one = 1;
    cr_assert(th_wait_until(&T, pending_is, &one, 5000));
    cl_close(c);
    /* the answer goes to a socket whose peer is gone: written or refused, then closed, freed once */
    th_answer(&T, 0, "too late");
    cr_assert(th_wait_until(&T, no_conns, NULL, 5000));
    cr_assert_eq(th_stats(&T).pending, 0);
}

Test(http_defer, an_answer_not_ready_in_time_is_504_and_the_late_one_is_dropped)
{
    start(200);
    cl_t *c = ask_later();
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 504);
    cl_resp_free(&r);
    cr_assert(cl_eof(c));
    cl_close(c);
    cr_assert(th_answer(&T, 0, "late"), "the pending is gone after the 504");
    http_stats_t st = th_stats(&T);
    cr_assert_eq(st.deferred_timeouts, 1);
    cr_assert_eq(st.pending, 0);
}

Test(http_defer, a_drain_answers_a_waiting_connection_503)
{
    start(0);
    cl_t *c = ask_later();
    unsigned one = 1;
    cr_assert(th_wait_until(&T, pending_is, &one, 5000));
    th_drain(&T);
    cl_resp_t r;
    cr_assert_eq(cl_read(c, &r, false), 0);
    cr_assert_eq(r.status, 503);
    cl_resp_free(&r);
    cl_close(c);
    cr_assert(th_answer(&T, 0, "after the drain"));
}

Test(http_defer, past_the_cap_the_handler_answers_at_once)
{
    start(0);
    cl_t *c[HTTP_MAX_PENDING];
    for (unsigned i = 0; i < HTTP_MAX_PENDING; i++) {
        c[i] = ask_later();
        unsigned n = i + 1;
        cr_assert(th_wait_until(&T, pending_is, &n, 5000));
    }
    char body[32];
    cr_assert_eq(cl_get(T.port, "/later", body, sizeof body), 200);
    cr_assert_str_eq(body, "now");
    for (unsigned i = 0; i < HTTP_MAX_PENDING; i++) {
        char text[16];
        snprintf(text, sizeof text, "n%u", i);
        th_answer(&T, i, text);
        cl_resp_t r;
        cr_assert_eq(cl_read(c[i], &r, false), 0);
        cr_assert_str_eq(r.body, text);
        cl_resp_free(&r);
        cl_close(c[i]);
    }
}
