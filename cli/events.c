/*
 * cli/events.c - `weir events [--markdown]`: the event catalog (every
 * durable and live event of an agent, with its data fields; docs/events.md).
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

int weir_cmd_events(int argc, char **argv) {
    static const struct option longopts[] = {{"markdown", no_argument, NULL, 'm'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    int ch;
    bool markdown = false;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'm':
            markdown = true;
            break;
        case 'h':
            printf("usage: weir events [--markdown]\n\n"
                   "Print the event catalog: every durable (session log) and live event an\n"
                   "agent delivers to on_event and the hooks, with its data fields.\n"
                   "--markdown prints it as docs/events.md.\n\n" WEIR_CLI_HELP_ENV_BASE);
            return WEIR_EXIT_OK;
        default:
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usage: weir events [--markdown]\n");
        return WEIR_EXIT_USAGE;
    }
    return weir_event_catalog_write(stdout, markdown) == WEIR_OK ? WEIR_EXIT_OK : WEIR_EXIT_IO;
}
