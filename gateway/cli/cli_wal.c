/*
 * cli_wal.c: `tributary wal dump` and `tributary wal check`, offline views
 * of a log directory (they take no lock: run them on a stopped gateway, or
 * accept that the newest records may be in flight).
 *
 *   tributary wal dump --dir DIR [--topic T] [--from N]   one JSON object per record
 *   tributary wal check --dir DIR                          verify every CRC; exit 1 if corrupt
 *   tributary wal forget-output NAME --dir DIR             drop an output's slots (refused while
 *                                                          the gateway runs: it holds the LOCK)
 *   tributary wal retire TOPIC --dir DIR                   remove a drained topic, leaving its
 *                                                          RETIRED entry (refused while locked,
 *                                                          or while it has a backlog)
 *   tributary wal forget TOPIC --dir DIR [--delete-unreplicated]
 *                                                          the same; with the flag whatever the
 *                                                          backlog (counted as forgotten)
 */
#include "gateway/cli/cli.h"
#include "wal/wal.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: tributary wal dump --dir DIR [--topic TOPIC] [--from OFFSET]\n"
                    "       tributary wal check --dir DIR\n"
                    "       tributary wal forget-output NAME --dir DIR\n"
                    "       tributary wal retire TOPIC --dir DIR\n"
                    "       tributary wal forget TOPIC --dir DIR [--delete-unreplicated]\n");
    return GW_EXIT_USAGE;
}

/* tributary wal retire|forget TOPIC --dir DIR [--delete-unreplicated] */
static int retire_topic(const char *sub, const char *topic, const char *dir, bool delete_unreplicated)
{
    tb_log_set_level(TB_LOG_WARN); /* the report below says what happened; the log's info lines would repeat it */
    int rc = wal_retire_offline(dir, topic, delete_unreplicated ? WAL_RETIRE_FORGET : WAL_RETIRE_REMOVE, stdout);
    if (rc == -EWOULDBLOCK)
        fprintf(stderr,
                "tributary wal %s: %s is in use by a running gateway (it holds %s/LOCK): stop it first, or ask "
                "it: tributary admin %s %s%s (remove the topic's mapping and reload first)\n",
                sub, dir, dir, sub, topic, delete_unreplicated ? " --delete-unreplicated" : "");
    else if (rc == -ENOENT)
        fprintf(stderr, "tributary wal %s: no topic \"%s\" in %s\n", sub, topic, dir);
    else if (rc == TB_EBUSY)
        fprintf(stderr,
                "tributary wal %s: \"%s\" is not drained: run the gateway with its mapping until the cluster has "
                "every message, or delete them: tributary wal forget %s --dir %s --delete-unreplicated\n",
                sub, topic, topic, dir);
    else if (rc < 0)
        fprintf(stderr, "tributary wal %s: %s: %s\n", sub, dir, tb_strerror(rc));
    return rc < 0 ? GW_EXIT_FAILURE : GW_EXIT_OK;
}

int cli_wal(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *sub = argv[1];
    static const struct option opts[] = {
        { "dir", required_argument, NULL, 'd' },
        { "topic", required_argument, NULL, 't' },
        { "from", required_argument, NULL, 'f' },
        { "delete-unreplicated", no_argument, NULL, 'D' },
        { NULL, 0, NULL, 0 },
    };
    const char *dir = NULL, *topic = NULL;
    uint64_t from = 0;
    bool delete_unreplicated = false;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc - 1, argv + 1, "d:t:f:", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': dir = optarg; break;
        case 't': topic = optarg; break;
        case 'D': delete_unreplicated = true; break;
        case 'f': {
            char *end;
            from = strtoull(optarg, &end, 10);
            if (*end) {
                fprintf(stderr, "tributary wal: --from wants an offset, got \"%s\"\n", optarg);
                return GW_EXIT_USAGE;
            }
            break;
        }
        default: return usage();
        }
    }
    bool forget = strcmp(sub, "forget-output") == 0;
    bool retire = strcmp(sub, "retire") == 0 || strcmp(sub, "forget") == 0;
    bool named = forget || retire; /* one positional argument */
    if (!dir || optind < argc - 1 - (named ? 1 : 0) || (named && optind != argc - 2) || (named && topic) ||
        (delete_unreplicated && strcmp(sub, "forget") != 0))
        return usage();
    int rc;
    if (retire)
        return retire_topic(sub, argv[1 + optind], dir, delete_unreplicated);
    if (forget) {
        const char *name = argv[1 + optind];
        rc = wal_forget_output(dir, name, stdout);
        if (rc == -EWOULDBLOCK)
            fprintf(stderr, "tributary wal forget-output: %s is in use (stop the gateway first)\n", dir);
        else if (rc == TB_EINVALID)
            fprintf(stderr, "tributary wal forget-output: \"%s\" cannot be forgotten (not a name, or danube)\n",
                    name);
        else if (rc == -ENOENT)
            fprintf(stderr, "tributary wal forget-output: no output \"%s\" in %s/OUTPUTS\n", name, dir);
        else if (rc < 0)
            fprintf(stderr, "tributary wal forget-output: %s: %s\n", dir, tb_strerror(rc));
        return rc < 0 ? GW_EXIT_FAILURE : GW_EXIT_OK;
    }
    if (strcmp(sub, "dump") == 0) {
        rc = wal_dump(dir, topic, from, stdout);
        if (rc < 0) {
            fprintf(stderr, "tributary wal dump: %s: %s\n", dir, tb_strerror(rc));
            return GW_EXIT_FAILURE;
        }
        return GW_EXIT_OK;
    }
    if (strcmp(sub, "check") == 0) {
        if (topic) return usage();
        rc = wal_check(dir, stdout);
        if (rc < 0) {
            fprintf(stderr, "tributary wal check: %s: %s\n", dir, tb_strerror(rc));
            return GW_EXIT_FAILURE;
        }
        return rc == 0 ? GW_EXIT_OK : GW_EXIT_FAILURE;
    }
    return usage();
}
