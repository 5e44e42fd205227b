/*
 * cli/compact.c - `weir compact [-c FILE]... [-i TEXT] [--json] ID`:
 * compact a session's context now, between turns (weir_agent_compact, the
 * agent/compact hook chain; compaction-basic answers it).  The session is
 * opened as `weir resume` opens it, so a turn left open by a crash is
 * closed as interrupted first.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char compact_help[] =
    "usage: weir compact [-c FILE]... [-i TEXT] [--json] ID\n"
    "\n"
    "Compact session ID (or a log file path) now: the deployment's compaction\n"
    "plugin (compaction-basic) prunes oversized tool results and summarizes\n"
    "the older part of the conversation, keeping the recent tail.  A turn\n"
    "left open by a crash is closed as interrupted first.\n"
    "\n"
    "  -c, --config FILE        deployment config (repeat to overlay; without -c, or\n"
    "                           with -c default first: the built-in deployment)\n"
    "  -i, --instructions TEXT  extra instructions for the summary\n"
    "      --json               print the result object as one JSON line\n"
    "\n"
    "Prints \"compacted: ...\", \"declined: ...\" (nothing to do, or no\n"
    "compaction plugin) or \"failed: ...\".\n"
    "exit codes: 0 compacted or declined, 1 failed (or a plugin's hook failed),\n"
    "            2 usage (also -i TEXT that is not UTF-8),\n"
    "            3 configuration or plugin load error, 4 I/O error\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

void weir_cli_print_compact(const json_t *r) {
    const char *kind = json_string_value(json_object_get(r, "kind"));
    const char *message = json_string_value(json_object_get(r, "message"));
    FILE *out = kind && strcmp(kind, "failed") == 0 ? stderr : stdout;
    fprintf(out, "%s", kind ? kind : "?");
    if (json_is_integer(json_object_get(r, "tokens_before"))) {
        fprintf(out,
                ": %" JSON_INTEGER_FORMAT " tool result(s) pruned, %" JSON_INTEGER_FORMAT
                " summar%s, %" JSON_INTEGER_FORMAT " -> %" JSON_INTEGER_FORMAT " tokens",
                json_integer_value(json_object_get(r, "pruned")),
                json_integer_value(json_object_get(r, "summaries")),
                json_integer_value(json_object_get(r, "summaries")) == 1 ? "y" : "ies",
                json_integer_value(json_object_get(r, "tokens_before")),
                json_integer_value(json_object_get(r, "tokens_after")));
        const char *id = json_string_value(json_object_get(r, "compaction_id"));
        char idb[160];
        if (id && *id)
            fprintf(out, " (%s)", weir_cli_esc(idb, sizeof idb, id));
    } else if (message) { /* a plugin's text: escaped, one line */
        size_t n = weir_text_escape(NULL, 0, message);
        char small[1024], *esc = n < sizeof small ? small : malloc(n + 1);
        if (!esc) {
            esc = small; /* cut */
            n = sizeof small - 1;
        }
        weir_text_escape(esc, n + 1, message);
        fprintf(out, ": %s", esc);
        if (esc != small)
            free(esc);
    }
    fputc('\n', out);
}

int weir_cmd_compact(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"instructions", required_argument, NULL, 'i'},
                                              {"json", no_argument, NULL, 'j'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    const char *instructions = NULL;
    bool json = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:i:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir compact", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'i':
            instructions = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            fputs(compact_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(compact_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "weir compact: %s\n\n%s",
                argc - optind < 1 ? "missing session ID" : "too many arguments", compact_help);
        return WEIR_EXIT_USAGE;
    }
    char *path = NULL;
    weir_host *host = NULL;
    int rc = weir_cli_session_host(&files, argv[optind], WEIR_CLI_ID_OR_PATH, "weir compact", &path,
                                    &host);
    if (rc != WEIR_EXIT_OK)
        return rc;
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_file = path;
    weir_agent *agent = NULL;
    weir_error err;
    weir_error_clear(&err);
    json_t *result = NULL;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK) {
        rc = weir_cli_fail("open session", &err);
    } else {
        int crc = weir_agent_compact(agent, instructions, &result, &err);
        if (crc != WEIR_OK) {
            rc = weir_cli_fail("compact", &err);
            if (crc == WEIR_E_INVAL) /* the instructions */
                rc = WEIR_EXIT_USAGE;
        } else {
            if (json) {
                char *line = weir_cli_json_line(result);
                if (line)
                    puts(line);
                free(line);
            } else {
                weir_cli_print_compact(result);
            }
            const char *kind = json_string_value(json_object_get(result, "kind"));
            rc = kind && strcmp(kind, "failed") == 0 ? WEIR_EXIT_FAIL : WEIR_EXIT_OK;
        }
        weir_agent_close(agent);
    }
    json_decref(result);
    weir_host_destroy(host);
    free(path);
    return rc;
}
