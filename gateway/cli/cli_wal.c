/*
 * cli_wal.c: `tributary wal dump` and `tributary wal check`, offline views
 * of a log directory (they take no lock: run them on a stopped gateway, or
 * accept that the newest records may be in flight).
 *
 *   tributary wal dump --dir DIR [--topic T] [--from N]   one JSON object per record
 *   tributary wal check --dir DIR                          verify every CRC; exit 1 if corrupt
 *   tributary wal forget-output NAME --dir DIR             drop an output's slots (refused while
 *                                                          the gateway runs: it holds the LOCK)
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
                    "       tributary wal forget-output NAME --dir DIR\n");
    return GW_EXIT_USAGE;
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
        { NULL, 0, NULL, 0 },
    };
    const char *dir = NULL, *topic = NULL;
    uint64_t from = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc - 1, argv + 1, "d:t:f:", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': dir = optarg; break;
        case 't': topic = optarg; break;
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
    if (!dir || optind < argc - 1 - (forget ? 1 : 0) || (forget && optind != argc - 2) || (forget && topic))
        return usage();
    int rc;
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
