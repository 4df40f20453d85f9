/* main.c: placeholder until the CLI lands (this commit only sets up the build). */
#include "base/base.h"
int main(void) { tb_info("tributary", TB_S("version", TRIB_VERSION)); return 0; }
