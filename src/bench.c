#include "cli.h"
#include <stdio.h>
int cli_bench(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "stagedoor: bench is not built yet\n"); return 1; }
