/*
 * cli/send.c - `weir send [-c FILE]... -s ID [--mode followup|steer|inject]
 * [--input-id ID] TEXT`: queue input for a session durably, without running
 * it.  For the file store the session is opened as its writer (as `weir
 * resume` opens it, so a crashed turn is closed first), the input is logged
 * as an inbox splice and synced, and the session is closed: the next `weir
 * resume` (or any writer) runs it.  A session another process holds is
 * refused, never merged.  A shared store with an inbox (store-postgres)
 * queues the input in the store instead (weir_host_store_send), without
 * a lease: it works while a worker runs the session, and the session's
 * next writer delivers it (docs/fleet.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char send_help[] =
    "usage: weir send [-c FILE]... -s ID [--mode followup|steer|inject] [--input-id ID] TEXT\n"
    "\n"
    "Queue TEXT as user input for session ID without running it: the input is\n"
    "logged (an inbox splice) and synced before weir send exits 0, and the next\n"
    "writer of the session (weir resume ID) takes it.  A session that another\n"
    "process has open (a running weir run, resume or serve) is refused: send it\n"
    "the input there.  With a shared store (session.store naming store-postgres)\n"
    "the input is queued in the store's inbox instead, also while a worker runs\n"
    "the session; the session's next writer (weir worker, weir resume) takes it.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay)\n"
    "  -s, --session ID    the session (required)\n"
    "      --mode MODE     followup (default: next turn), steer (next step) or\n"
    "                      inject (next step, does not wake the agent)\n"
    "      --input-id ID   the input's id: sending the same id and text again\n"
    "                      is acknowledged once, nothing queued twice\n"
    "\n"
    "exit codes: 0 queued (durable), 1 refused (duplicate id, caps),\n"
    "            2 usage, 3 configuration or plugin load error,\n"
    "            4 I/O error or the session is open in another process\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

int weir_cmd_send(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"session", required_argument, NULL, 's'},
                                              {"mode", required_argument, NULL, 'm'},
                                              {"input-id", required_argument, NULL, 'i'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    const char *sid = NULL, *input_id = NULL, *mode_name = "followup";
    int ch;
    while ((ch = getopt_long(argc, argv, "c:s:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir send", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 's':
            sid = optarg;
            break;
        case 'm':
            mode_name = optarg;
            break;
        case 'i':
            input_id = optarg;
            break;
        case 'h':
            fputs(send_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(send_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    weir_send_mode mode;
    if (strcmp(mode_name, "followup") == 0)
        mode = WEIR_SEND_FOLLOWUP;
    else if (strcmp(mode_name, "steer") == 0)
        mode = WEIR_SEND_STEER;
    else if (strcmp(mode_name, "inject") == 0)
        mode = WEIR_SEND_INJECT;
    else {
        fprintf(stderr, "weir send: --mode must be followup, steer or inject, got '%s'\n",
                mode_name);
        return WEIR_EXIT_USAGE;
    }
    if (!sid || !weir_session_id_valid(sid)) {
        fprintf(stderr, "weir send: %s\n\n%s", sid ? "invalid session ID" : "missing -s ID",
                send_help);
        return WEIR_EXIT_USAGE;
    }
    if (argc - optind != 1 || !*argv[optind]) {
        fprintf(stderr, "weir send: %s\n\n%s",
                argc - optind < 1 || !*argv[optind] ? "missing TEXT" : "too many arguments",
                send_help);
        return WEIR_EXIT_USAGE;
    }
    char *path = NULL;
    weir_host *host = NULL;
    int rc = weir_cli_session_host(&files, sid, WEIR_CLI_ID_OR_PATH, "weir send", &path, &host);
    if (rc != WEIR_EXIT_OK)
        return rc;
    weir_error err;
    weir_error_clear(&err);
    /* a shared store queues the input in its inbox, whoever runs the session */
    json_t *qmsg = json_pack("{s:s, s:s}", "role", "user", "content", argv[optind]);
    bool dup = false;
    int qrc = qmsg ? weir_host_store_send(host, sid, input_id, mode_name, qmsg, &dup, &err)
                   : WEIR_E_NOMEM;
    json_decref(qmsg);
    if (qrc != WEIR_E_UNSUPPORTED) {
        if (qrc == WEIR_OK) {
            printf("%s for %s (%s)\n", dup ? "already queued" : "queued", sid, mode_name);
        } else if (qrc == WEIR_E_DUPLICATE || qrc == WEIR_E_LIMIT) {
            weir_cli_say(NULL, NULL, "weir send: refused: %s", err.text);
            rc = WEIR_EXIT_FAIL;
        } else {
            rc = weir_cli_fail("send", &err);
        }
        weir_host_destroy(host);
        free(path);
        return rc;
    }
    weir_error_clear(&err);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_file = path;
    weir_agent *agent = NULL;
    int orc = weir_agent_open(host, &opts, &agent, &err);
    if (orc == WEIR_E_BUSY) {
        weir_cli_say(NULL, NULL, "weir send: refused: %s; send the input to that process instead",
                     err.text);
        rc = WEIR_EXIT_IO;
    } else if (orc != WEIR_OK) {
        rc = weir_cli_fail("open session", &err);
    } else {
        json_t *msg = json_pack("{s:s, s:s}", "role", "user", "content", argv[optind]);
        int src = msg ? weir_agent_send(agent, msg, mode, input_id, &err) : WEIR_E_NOMEM;
        json_decref(msg);
        if (src != WEIR_OK)
            rc = weir_cli_fail("send", &err);
        weir_agent_close(agent); /* syncs the log (the input is durable) */
        if (src == WEIR_OK)
            printf("queued for %s (%s)\n", sid, mode_name);
    }
    weir_host_destroy(host);
    free(path);
    return rc;
}
