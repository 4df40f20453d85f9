/* cli.h: the subcommands of the `tributary` binary (gateway/cli_*.c, linked into the executable only). */
#ifndef GW_CLI_H
#define GW_CLI_H

#include <stdio.h>

#include "gateway/gateway.h"

void cli_usage(FILE *out);
int cli_run(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_config(int argc, char **argv);
int cli_wal(int argc, char **argv);
int cli_status(int argc, char **argv);

/* Parses "-c FILE" / "--config FILE" / "--config=FILE" options shared by
 * run and check. Returns 0, or GW_EXIT_USAGE after printing usage. */
int cli_parse_config_opt(int argc, char **argv, const char **path /* OUT */);

#endif
