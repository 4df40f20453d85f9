/* The option parsing run and check share, and the exit codes it leads to (cli.h). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "gateway/cli/cli.h"

static int parse(const char **path, int argc, char **argv)
{
    return cli_parse_config_opt(argc, argv, path);
}

Test(cli_args, config_file_given_three_ways, .init = cr_redirect_stderr)
{
    const char *path;
    cr_assert_eq(parse(&path, 3, (char *[]){ "run", "-c", "a.yaml", NULL }), 0);
    cr_assert_str_eq(path, "a.yaml");
    cr_assert_eq(parse(&path, 3, (char *[]){ "run", "--config", "b.yaml", NULL }), 0);
    cr_assert_str_eq(path, "b.yaml");
    cr_assert_eq(parse(&path, 2, (char *[]){ "run", "--config=c.yaml", NULL }), 0);
    cr_assert_str_eq(path, "c.yaml");
    cr_assert_eq(parse(&path, 1, (char *[]){ "run", NULL }), 0);
    cr_assert_null(path, "no -c: the embedded default");
}

Test(cli_args, help_is_its_own_answer_and_the_command_exits_0, .init = cr_redirect_stdout)
{
    const char *path;
    cr_assert_eq(parse(&path, 2, (char *[]){ "check", "--help", NULL }), CLI_HELP_SHOWN);
    cr_assert_eq(cli_check(2, (char *[]){ "check", "--help", NULL }), GW_EXIT_OK);
    cr_assert_eq(cli_run(2, (char *[]){ "run", "-h", NULL }), GW_EXIT_OK);
}

Test(cli_args, bad_usage_is_exit_2, .init = cr_redirect_stderr)
{
    const char *path;
    cr_assert_eq(parse(&path, 2, (char *[]){ "run", "--frobnicate", NULL }), GW_EXIT_USAGE);
    cr_assert_eq(parse(&path, 2, (char *[]){ "run", "extra", NULL }), GW_EXIT_USAGE);
    cr_assert_eq(cli_check(1, (char *[]){ "check", NULL }), GW_EXIT_USAGE, "check needs -c");
    cr_assert_eq(cli_config(2, (char *[]){ "config", "--frobnicate", NULL }), GW_EXIT_USAGE);
    cr_assert_eq(cli_wal(1, (char *[]){ "wal", NULL }), GW_EXIT_USAGE);
}
