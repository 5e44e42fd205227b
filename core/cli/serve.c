/* core/cli/serve.c - `weir serve --stdio` (placeholder until generations land). */
#include <stdio.h>

#include "cli.h"

int weir_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "weir serve: not built yet\n");
    return WEIR_EXIT_FAIL;
}
