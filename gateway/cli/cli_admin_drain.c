/*
 * cli_admin_drain.c: `tributary admin pause|resume|retire TOPIC`, `tributary
 * admin forget TOPIC --delete-unreplicated` and `tributary
 * admin drain [--timeout DURATION] [--no-wait] [--status]` (cli_admin.c
 * hands them here; the same address, token and TLS options, cli_target.c).
 *
 *   admin pause /edge1/t     POST /admin/topics/edge1/t/pause: replication
 *   admin resume /edge1/t    of that topic holds / goes on. Exit 0 done,
 *                            1 refused (unknown topic: the gateway's words)
 *   admin retire /edge1/t    POST /admin/topics/edge1/t/retire: a topic no
 *                            mapping routes to, drained, is retired now (its
 *                            directory removed, its RETIRED entry written).
 *                            Exit 0 accepted ("removing": /stats says
 *                            "retired" once done) or already retired, 1
 *                            refused: still mapped, or its backlog (printed)
 *   admin forget /edge1/t --delete-unreplicated
 *                            POST .../forget?confirm=yes: the same whatever
 *                            its backlog (deleted, counted as forgotten);
 *                            the flag is required, as for `wal forget`
 *   admin drain              POST /admin/drain?wait_ms=...: stop accepting,
 *                            replicate everything; waits until "drained"
 *                            (exit 0) or --timeout [25s] (exit 1, what is
 *                            left printed). Asks again every 25 s (the
 *                            gateway's deferred answers last at most 30 s),
 *                            so any timeout works; asking again is harmless
 *                            (the drain is idempotent)
 *   admin drain --no-wait    starts it and prints the state
 *   admin drain --status     GET /admin/drain: the state, changing nothing
 *   admin drain --cancel     POST /admin/drain/cancel: accepting again (exit
 *                            1 while the drain is still closing connections)
 *
 * Usage errors exit 2, an unreachable gateway 1.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASK_MS 25000u /* one deferred answer: below the gateway's 30 s bound */

static void usage(FILE *out)
{
    fprintf(out, "usage: tributary admin pause|resume|retire TOPIC [target options]\n"
                 "       tributary admin forget TOPIC --delete-unreplicated [target options]\n"
                 "       tributary admin drain [--timeout DURATION] [--no-wait | --status | --cancel] [target options]\n"
                 "  pause TOPIC        POST /admin/topics/NS/T/pause (TOPIC: /NS/T, the upstream name)\n"
                 "  resume TOPIC       POST /admin/topics/NS/T/resume\n"
                 "  retire TOPIC       a topic no mapping routes to, drained (or kept): retire it now\n"
                 "                     (refused with its backlog when not drained, or when still mapped)\n"
                 "  forget TOPIC --delete-unreplicated\n"
                 "                     the same whatever its backlog: its unreplicated messages are deleted\n"
                 "  drain              stop accepting, replicate everything, wait until drained:\n"
                 "                     exit 0 drained, 1 timed out (--timeout, default 25s; 90s, 1500ms, 30)\n"
                 "  --no-wait          start the drain, print its state, do not wait\n"
                 "  --status           GET /admin/drain: print the state only\n"
                 "  --cancel           POST /admin/drain/cancel: listen and accept again\n"
                 "  target options: --http ADDR, -c FILE, --token-file FILE, --cafile/--cert/--key (see admin --help)\n");
}

/* "25", "25s", "1500ms", "2m" -> ms; false when malformed. */
static bool duration_ms(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return false;
    if (strcmp(end, "ms") == 0)
        *out = v;
    else if (!*end || strcmp(end, "s") == 0)
        *out = v * 1000;
    else if (strcmp(end, "m") == 0)
        *out = v * 60000;
    else
        return false;
    return true;
}

static int topic_verb(cli_target_t *t, const char *verb, const char *topic)
{
    const char *name = topic[0] == '/' ? topic + 1 : topic;
    char path[600];
    snprintf(path, sizeof path, "/admin/topics/%s/%s%s", name, verb,
             strcmp(verb, "forget") == 0 ? "?confirm=yes" : "");
    int status;
    tb_buf_t body = TB_BUF_INIT;
    int rc = cli_target_fetch(t, verb, "POST", path, 10000, &status, &body);
    if (rc == GW_EXIT_OK) {
        if (status == 200 || status == 202) { /* 202: retire|forget accepted, running on the pool */
            fputs(tb_buf_str(&body), stdout);
        } else {
            fprintf(stderr, "tributary admin %s %s: the gateway answered %d: %s", verb, topic, status, tb_buf_str(&body));
            rc = GW_EXIT_FAILURE;
        }
    }
    tb_buf_free(&body);
    return rc;
}

static const char *state_of(tb_buf_t *body, json_t **doc)
{
    json_error_t je;
    *doc = json_loadb(tb_buf_str(body), body->len, 0, &je);
    return json_string_value(json_object_get(*doc, "state"));
}

static int cancel(cli_target_t *t)
{
    int status;
    tb_buf_t body = TB_BUF_INIT;
    int rc = cli_target_fetch(t, "drain --cancel", "POST", "/admin/drain/cancel", 10000, &status, &body);
    if (rc == GW_EXIT_OK && status != 200) {
        fprintf(stderr, "tributary admin drain --cancel: the gateway answered %d: %s", status, tb_buf_str(&body));
        rc = GW_EXIT_FAILURE;
    } else if (rc == GW_EXIT_OK) {
        fputs(tb_buf_str(&body), stdout);
    }
    tb_buf_free(&body);
    return rc;
}

static int drain(cli_target_t *t, uint64_t timeout_ms, bool wait, bool status_only)
{
    uint64_t deadline = tb_mono_ms() + timeout_ms;
    tb_buf_t body = TB_BUF_INIT;
    int rc, status;
    for (;;) {
        uint64_t now = tb_mono_ms(), left = deadline > now ? deadline - now : 0;
        uint64_t ask = wait && !status_only ? TB_MIN(left, (uint64_t)ASK_MS) : 0;
        char path[64];
        snprintf(path, sizeof path, "/admin/drain%s%llu", ask ? "?wait_ms=" : "", (unsigned long long)ask);
        if (!ask)
            snprintf(path, sizeof path, "/admin/drain");
        rc = cli_target_fetch(t, "drain", status_only ? "GET" : "POST", path, ask + 10000, &status, &body);
        if (rc != GW_EXIT_OK)
            break;
        json_t *doc;
        const char *state = state_of(&body, &doc);
        if (status != 200 || !state) {
            fprintf(stderr, "tributary admin drain: the gateway answered %d: %s", status, tb_buf_str(&body));
            json_decref(doc);
            rc = GW_EXIT_FAILURE;
            break;
        }
        bool done = strcmp(state, "drained") == 0;
        json_decref(doc);
        if (done || !wait || status_only || tb_mono_ms() >= deadline) {
            fputs(tb_buf_str(&body), stdout);
            if (!done && wait && !status_only) {
                fprintf(stderr, "tributary admin drain: not drained within %llu ms (still draining; the gateway "
                                "keeps refusing connections until it restarts)\n",
                        (unsigned long long)timeout_ms);
                rc = GW_EXIT_FAILURE;
            }
            break;
        }
    }
    tb_buf_free(&body);
    return rc;
}

int cli_admin_drain(int argc, char **argv)
{
    const char *verb = argv[1], *topic = NULL;
    bool is_drain = strcmp(verb, "drain") == 0, wait = true, status_only = false, cancelling = false;
    bool forget = strcmp(verb, "forget") == 0, delete_unreplicated = false;
    uint64_t timeout_ms = 25000;
    cli_target_t t = { .cmd = "admin", .admin = true, .req = { .max_body = 1u << 20 } };
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return GW_EXIT_OK;
        }
        int taken = cli_target_opt(&t, argc, argv, &i);
        if (taken > 0)
            continue;
        if (taken < 0) {
            usage(stderr);
            return GW_EXIT_USAGE;
        }
        if (is_drain && strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            if (!duration_ms(argv[++i], &timeout_ms)) {
                fprintf(stderr, "tributary admin drain: --timeout %s: a duration (25s, 1500ms, 2m)\n", argv[i]);
                return GW_EXIT_USAGE;
            }
        } else if (is_drain && strcmp(argv[i], "--no-wait") == 0) {
            wait = false;
        } else if (is_drain && strcmp(argv[i], "--wait") == 0) {
            wait = true; /* the default (RELOAD.md 6.5's spelling) */
        } else if (is_drain && strcmp(argv[i], "--status") == 0) {
            status_only = true;
        } else if (is_drain && strcmp(argv[i], "--cancel") == 0) {
            cancelling = true;
        } else if (forget && strcmp(argv[i], "--delete-unreplicated") == 0) {
            delete_unreplicated = true;
        } else if (!is_drain && !topic && argv[i][0] != '-') {
            topic = argv[i];
        } else {
            fprintf(stderr, "tributary admin %s: unexpected argument \"%s\"\n", verb, argv[i]);
            usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    if (!is_drain && !topic) {
        fprintf(stderr, "tributary admin %s: which topic? (its upstream name, /NAMESPACE/TOPIC)\n", verb);
        usage(stderr);
        return GW_EXIT_USAGE;
    }
    if (forget && !delete_unreplicated) {
        fprintf(stderr, "tributary admin forget %s: this deletes its messages no output has yet: add "
                        "--delete-unreplicated (or wait: `tributary admin retire %s` once it is drained)\n",
                topic, topic);
        return GW_EXIT_USAGE;
    }
    int rc = cli_target_resolve(&t);
    if (rc == GW_EXIT_OK)
        rc = cancelling ? cancel(&t) : is_drain ? drain(&t, timeout_ms, wait, status_only) : topic_verb(&t, verb, topic);
    cli_target_done(&t);
    return rc;
}
