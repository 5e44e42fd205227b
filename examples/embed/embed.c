/*
 * examples/embed/embed.c - embed libweir in a C program.
 *
 * Composes the deployment (the -c files given, or the built-in default),
 * loads its plugins, opens one agent, sends one prompt, runs the driver on
 * this thread until the agent is idle, and prints the assistant's text as
 * it streams.  The agent gets a listener of its own (weir_agent_options.hooks):
 * every tool call is announced on stderr before the deployment's chain
 * decides on it.  Then weir_agent_last_turn() says how the turn ended: a
 * turn that did not complete is reported with its failure, and the exit
 * status is 1.  Usage: weir-embed-example [-c FILE]... PROMPT
 */
#include <stdio.h>
#include <string.h>

#include <weir/weir.h>

/* Print assistant text deltas as they stream (live events). */
static void on_event(const json_t *event, bool durable, void *user_data) {
    (void)user_data;
    const char *type = json_string_value(json_object_get(event, "type"));
    if (durable || !type || strcmp(type, "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(event, "data"), "frame");
    const json_t *chunk = json_object_get(frame, "chunk");
    const char *ctype = json_string_value(json_object_get(chunk, "type"));
    if (ctype && !strcmp(ctype, "text-delta")) {
        fputs(json_string_value(json_object_get(chunk, "text")), stdout);
        fflush(stdout);
    }
}

/* tools/pre-execute, for this agent only: announce the call, then let the
 * rest of the chain (and the core default, "allow") decide. */
static json_t *announce_tool(weir_call *call, const json_t *args, void *user_data) {
    (void)user_data;
    fprintf(stderr, "[%s] %s %s\n", weir_agent_id(weir_host_api()->call_agent(call)),
            json_string_value(json_object_get(args, "name")),
            json_string_value(json_object_get(args, "arguments")));
    return weir_host_api()->next(call);
}

int main(int argc, char **argv) {
    const char *files[16];
    size_t nfiles = 0;
    int i = 1;
    while (i + 1 < argc && !strcmp(argv[i], "-c") && nfiles < 16) {
        files[nfiles++] = argv[i + 1];
        i += 2;
    }
    if (i != argc - 1) {
        fprintf(stderr, "usage: %s [-c FILE]... PROMPT\n", argv[0]);
        return 2;
    }

    weir_error err;
    weir_error_clear(&err);
    json_t *config = NULL;
    weir_host *host = NULL;
    weir_agent *agent = NULL;
    int rc = 1;

    if (weir_config_compose(files, nfiles, &config, &err) != WEIR_OK ||
        weir_host_create(config, &host, &err) != WEIR_OK) {
        fprintf(stderr, "embed: %s\n", err.text);
        goto out;
    }
    weir_agent_hook own = {"tools/pre-execute", announce_tool, NULL};
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.on_event = on_event;
    opts.hooks = &own;
    opts.nhooks = 1;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK ||
        weir_agent_send_text(agent, argv[i], WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
        weir_agent_run_until_idle(agent, &err) != WEIR_OK) {
        fprintf(stderr, "embed: %s\n", err.text);
        goto out;
    }
    printf("\n[session %s: %s]\n", weir_agent_id(agent), weir_agent_log_path(agent));
    /* run_until_idle is WEIR_OK however the turn ended: ask how it did */
    weir_turn_outcome outcome = WEIR_TURN_OUTCOME_INIT;
    if (weir_agent_last_turn(agent, &outcome, &err) != WEIR_OK) {
        fprintf(stderr, "embed: %s\n", err.text);
        goto out;
    }
    if (strcmp(outcome.kind, "completed") == 0 || strcmp(outcome.kind, "max-tokens") == 0)
        rc = 0;
    else if (outcome.failure_code[0])
        fprintf(stderr, "embed: turn %d ended in %s: %s: %s\n", outcome.turn, outcome.kind,
                outcome.failure_code, outcome.failure_message);
    else
        fprintf(stderr, "embed: turn %d ended: %s\n", outcome.turn, outcome.kind);
    weir_turn_outcome_clear(&outcome);
out:
    weir_agent_close(agent);
    weir_host_destroy(host);
    json_decref(config);
    return rc;
}
