/*
 * cli_main.c: the `tributary` command line. Parses the subcommand and hands
 * over; every subcommand lives in its own cli_*.c file. main.c only calls
 * cli_main, so the whole command line is in tb_cli and its unit tests.
 *
 *   tributary run [-c FILE]            run in the foreground (logs to stderr)
 *   tributary check -c FILE            validate, print the effective config
 *   tributary config --describe [--reloadable] [--markdown]
 *   tributary wal dump|check --dir DIR ... | wal forget-output NAME --dir DIR
 *   tributary wal retire TOPIC --dir DIR | wal forget TOPIC --dir DIR [--delete-unreplicated]
 *   tributary status [--http [https://]ADDR] [-c FILE] [--cafile FILE] [--json] ...
 *   tributary admin reload|config|pause T|resume T|retire T|forget T|drain [--http [https://]ADDR] [-c FILE] [--token-file FILE] ...
 *   tributary passwd [--iterations N] [--delete] FILE USER
 *   tributary --version | --help
 */
#include "gateway/cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "run", cli_run, "run the gateway in the foreground" },
    { "check", cli_check, "validate a configuration file and print the effective configuration" },
    { "config", cli_config, "describe every configuration key (--describe [--reloadable] [--markdown])" },
    { "wal", cli_wal, "inspect a log directory: wal dump --dir DIR [--topic T] [--from N] | wal check --dir DIR | "
             "wal forget-output NAME --dir DIR | wal retire TOPIC --dir DIR | "
             "wal forget TOPIC --dir DIR [--delete-unreplicated]" },
    { "status", cli_status, "show a running gateway's state from its /stats (--http [https://]ADDR, -c FILE, --cafile, --json)" },
    { "dlq", cli_dlq, "the dead-letter log: dlq list | show OFFSET | replay --from N --to M | purge --to M --yes "
                      "(--dir DIR offline, or --http/-c for the running gateway)" },
    { "admin", cli_admin, "ask a running gateway's admin API: admin reload | config | pause T | resume T | retire T | forget T | drain (--http, -c FILE, --token-file)" },
    { "passwd", cli_passwd, "add, change or --delete a user of a Mosquitto-format password file: passwd FILE USER" },
};

void cli_usage(FILE *out)
{
    fprintf(out, "usage: tributary <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\noptions:\n"
            "  -c, --config FILE   configuration file (edge.yaml); run without it uses the embedded default\n"
            "  --version           print the version\n"
            "  --help              print this help\n"
            "\nexit codes: 0 success, 1 runtime failure, 2 bad usage or invalid configuration\n");
}

int cli_main(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stderr);
        return GW_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("tributary %s\n", TRIB_VERSION);
        return GW_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        cli_usage(stdout);
        return GW_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tributary: unknown command \"%s\"\n\n", argv[1]);
    cli_usage(stderr);
    return GW_EXIT_USAGE;
}
