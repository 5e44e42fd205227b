/* core/cli/log.c - `weir log` (placeholder until the session log lands). */
#include <stdio.h>

#include "cli.h"

int weir_cmd_log(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "weir log: not built yet\n");
    return WEIR_EXIT_FAIL;
}
