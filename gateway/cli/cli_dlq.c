/*
 * cli_dlq.c: `tributary dlq list|show|replay|purge`, the dead-letter log
 * (docs/OPERATIONS.md "The dead-letter log: tributary dlq"; RELOAD.md 5.7).
 *
 *   dlq list   [--dir D | --http ADDR ...] [--from N] [--limit K]
 *   dlq show   OFFSET [--dir D | --http ADDR ...]
 *   dlq replay --from N --to M [--http ADDR ...]   needs the running gateway: routing is its
 *   dlq purge  --to M --yes [--http ADDR ...]      deletes: needs --yes; through the gateway
 *
 * --dir reads `$dead-letter` offline (wal_dump: no lock, works while the
 * gateway runs; it shows the records a purge passed until retention has
 * deleted their segment); otherwise the admin API (GET /admin/dlq, POST
 * /admin/dlq/replay|purge) with `tributary admin`'s options (--http, -c,
 * --token-file, --cafile, --cert, --key). Output: JSON (the API's answer;
 * offline one record per line). Exit 0, 1 refused or not reached, 2 usage.
 */
#include "gateway/cli/cli.h"
#include "base/base.h"
#include "wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DLQ_TIMEOUT_MS 30000
#define DLQ_MAX_BODY (16u << 20)
#define DL_TOPIC "$dead-letter"

static void usage(FILE *out)
{
    fprintf(out, "usage: tributary dlq list   [--dir DIR | --http ADDR] [--from N] [--limit K]\n"
                 "       tributary dlq show   OFFSET [--dir DIR | --http ADDR]\n"
                 "       tributary dlq replay --from N --to M [--http ADDR]   (routed and validated again)\n"
                 "       tributary dlq purge  --to M --yes [--http ADDR]      (deletes the dead letters up to M)\n"
                 "  --dir DIR          read wal.dir offline (list, show)\n"
                 "  --http ADDR, -c FILE, --token-file FILE, --cafile, --cert, --key: as `tributary admin`\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return false;
    *out = v;
    return true;
}

/* Offline: list (limit records from `from`) or show (the one at `from`). */
static int offline(const char *dir, uint64_t from, uint64_t limit, bool show)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return GW_EXIT_FAILURE;
    int rc = wal_dump(dir, DL_TOPIC, from ? from : 1, f);
    fclose(f);
    if (rc < 0) {
        fprintf(stderr, "tributary dlq: %s: %s\n", dir, tb_strerror(rc));
        free(text);
        return GW_EXIT_FAILURE;
    }
    uint64_t n = 0;
    int code = show ? GW_EXIT_FAILURE : GW_EXIT_OK;
    for (char *line = text, *nl; line && *line && n < limit; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (show) {
            json_t *o = json_loads(line, 0, NULL);
            bool hit = json_integer_value(json_object_get(o, "offset")) == (json_int_t)from;
            json_decref(o);
            if (!hit)
                continue;
            code = GW_EXIT_OK;
        }
        puts(line);
        n++;
    }
    if (show && code != GW_EXIT_OK)
        fprintf(stderr, "tributary dlq show: no dead letter at offset %llu\n", (unsigned long long)from);
    free(text);
    return code;
}

int cli_dlq(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? GW_EXIT_USAGE : GW_EXIT_OK;
    }
    const char *verb = argv[1];
    bool list = strcmp(verb, "list") == 0, show = strcmp(verb, "show") == 0;
    bool replay = strcmp(verb, "replay") == 0, purge = strcmp(verb, "purge") == 0;
    if (!list && !show && !replay && !purge) {
        fprintf(stderr, "tributary dlq: unknown command \"%s\" (list, show, replay or purge)\n", verb);
        usage(stderr);
        return GW_EXIT_USAGE;
    }
    cli_target_t t = { .cmd = "dlq", .admin = true, .req = { .timeout_ms = DLQ_TIMEOUT_MS, .max_body = DLQ_MAX_BODY } };
    const char *dir = NULL;
    uint64_t from = 0, to = 0, limit = 100, offset = 0;
    bool has_from = false, has_to = false, yes = false;
    int i = 2;
    if (show && (i >= argc || !parse_u64(argv[i++], &offset) || offset == 0)) {
        fprintf(stderr, "tributary dlq show: give the OFFSET of a dead letter (1 or more)\n");
        return GW_EXIT_USAGE;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        bool val = i + 1 < argc;
        if (strcmp(a, "--dir") == 0 && val) {
            dir = argv[++i];
        } else if (strcmp(a, "--from") == 0 && val && parse_u64(argv[i + 1], &from)) {
            has_from = true;
            i++;
        } else if (strcmp(a, "--to") == 0 && val && parse_u64(argv[i + 1], &to)) {
            has_to = true;
            i++;
        } else if (strcmp(a, "--limit") == 0 && val && parse_u64(argv[i + 1], &limit) && limit >= 1 && limit <= 1000) {
            i++;
        } else if (strcmp(a, "--yes") == 0) {
            yes = true;
        } else {
            int taken = cli_target_opt(&t, argc, argv, &i);
            if (taken > 0)
                continue;
            if (taken == 0)
                fprintf(stderr, "tributary dlq %s: unexpected or bad argument \"%s\"\n", verb, a);
            usage(stderr);
            return GW_EXIT_USAGE;
        }
    }
    if (replay && (!has_from || !has_to || from == 0 || to < from)) {
        fprintf(stderr, "tributary dlq replay: give --from N --to M (1 <= N <= M)\n");
        return GW_EXIT_USAGE;
    }
    if (purge && (!has_to || to == 0)) {
        fprintf(stderr, "tributary dlq purge: give --to M (the last offset to delete)\n");
        return GW_EXIT_USAGE;
    }
    if (purge && !yes) {
        fprintf(stderr, "tributary dlq purge: it deletes dead letters: add --yes to confirm\n");
        return GW_EXIT_USAGE;
    }
    if (dir) {
        if (replay || purge) {
            fprintf(stderr, "tributary dlq %s: needs the running gateway (its routing, its log): use --http or -c, "
                            "not --dir\n", verb);
            return GW_EXIT_USAGE;
        }
        return offline(dir, show ? offset : from, show ? 1 : limit, show);
    }
    int trc = cli_target_resolve(&t);
    if (trc != GW_EXIT_OK) {
        cli_target_done(&t);
        return trc;
    }
    char path[160];
    if (list)
        snprintf(path, sizeof path, "/admin/dlq?from=%llu&limit=%llu", (unsigned long long)from,
                 (unsigned long long)limit);
    else if (show)
        snprintf(path, sizeof path, "/admin/dlq?offset=%llu", (unsigned long long)offset);
    else if (replay)
        snprintf(path, sizeof path, "/admin/dlq/replay?from=%llu&to=%llu", (unsigned long long)from,
                 (unsigned long long)to);
    else
        snprintf(path, sizeof path, "/admin/dlq/purge?to=%llu&confirm=yes", (unsigned long long)to);
    int status;
    tb_buf_t body = TB_BUF_INIT;
    int code = cli_target_fetch(&t, verb, list || show ? "GET" : "POST", path, 0, &status, &body);
    cli_target_done(&t);
    if (code != GW_EXIT_OK) {
        tb_buf_free(&body);
        return code;
    }
    if (status == 200) {
        fputs(tb_buf_str(&body), stdout);
    } else {
        fprintf(stderr, "tributary dlq %s: the gateway answered %d: %s", verb, status, tb_buf_str(&body));
        code = GW_EXIT_FAILURE;
    }
    tb_buf_free(&body);
    return code;
}
