/* core/cli/run.c - `weir run` and `weir resume` (placeholder until the driver lands). */
#include <stdio.h>

#include "cli.h"

int weir_cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "weir run: not built yet\n");
    return WEIR_EXIT_FAIL;
}

int weir_cmd_resume(int argc, char **argv) { return weir_cmd_run(argc, argv); }
