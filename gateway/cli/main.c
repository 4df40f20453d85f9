/* main.c: the `tributary` executable; the command line is cli_main (cli_main.c). */
#include "gateway/cli/cli.h"

int main(int argc, char **argv)
{
    return cli_main(argc, argv);
}
