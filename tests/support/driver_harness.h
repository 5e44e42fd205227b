/*
 * tests/support/driver_harness.h - the driver tests' harness: build a host
 * from plugin rows (provider-scripted, system-prompt and the config-driven
 * test plugins of tests/driver-plugins/), open an agent on a temp session
 * dir, collect every event, and check each log the test wrote:
 * weir_log_check, replay (a fresh derive equals the agent's history), and
 * derive == request for every recorded request.
 *
 * Every host built here also loads drvtest-hooks with record_requests, so
 * each frozen request (and each plugin's call through llm/stream) lands in
 * the log as drvtest/request and dh_check() rebuilds it from the log prefix
 * before it, independently of the driver.
 */
#ifndef WEIR_DRIVER_HARNESS_H
#define WEIR_DRIVER_HARNESS_H

#include <stdbool.h>

#include <weir/weir.h>

typedef struct dh dh;

/* Called for every event, on the driver's thread, after it was recorded. */
typedef void (*dh_event_fn)(dh *d, const json_t *event, bool durable);

struct dh {
    char *dir;         /* temp dir holding the sessions */
    json_t *config;    /* the composed config */
    weir_host *host;
    weir_agent *agent;
    json_t *events;    /* every event, in delivery order (durable ones have "seq") */
    dh_event_fn on_event;
    void *ud;          /* for the test */
    int count;         /* free counter for on_event callbacks */
    const weir_agent_hook *hooks; /* dh_open passes these as the agent's own */
    size_t nhooks;
    int wakes;         /* on_wake calls (atomic; dh_wait_wake waits for more) */
};

/*
 * Build the host.  `rows` is a JSON array text of extra plugin rows; in it
 * "@DATA@" is replaced by $WEIR_TEST_DATA_DIR.  `agent` (may be NULL) is a
 * JSON object text merged into the agent options
 * (default {provider:"scripted", model:"demo", max_tokens:1024}).
 */
void dh_setup(dh *d, const char *rows, const char *agent);
/* dh_setup with `session` (a JSON object text, may be NULL) merged into
 * the session config (e.g. {"provenance":"all"}). */
void dh_setup_session(dh *d, const char *rows, const char *agent, const char *session);
/* Open (or resume) session `id` (NULL: a new id). */
void dh_open(dh *d, const char *id);
/* Close the agent (the host stays). */
void dh_close(dh *d);
/* Send text; asserts WEIR_OK. */
void dh_send(dh *d, const char *text, weir_send_mode mode);
/* weir_agent_run_until_idle; asserts WEIR_OK. */
void dh_run(dh *d);
/* Wait (at most 20 s, then fail) until on_wake was called more than
 * `seen` times; returns the count. */
int dh_wait_wake(dh *d, int seen);
/* Comma-joined types of the recorded events (durable only, or all),
 * without drvtest/request and the core's provenance events (hook/...). */
char *dh_types(const dh *d, bool durable_only);
/* The n-th (0-based) recorded durable event of `type`, or NULL. Borrowed. */
const json_t *dh_find(const dh *d, const char *type, int n);
/* How many recorded events have `type`. */
int dh_count(const dh *d, const char *type);
/* The log path of the open agent (borrowed). */
const char *dh_log(const dh *d);
/*
 * Check the log at `path`: weir_log_check ok (open turns allowed when
 * `allow_open`), weir_log_derive equals `expect_messages` when given, and
 * every drvtest/request equals the request rebuilt from the log before it
 * (one with purpose "compaction", a summary, must replay a prefix of that
 * request byte for byte plus one final user message, with the same tools
 * and, with tools, tool_choice "none"; other purposes are not checked).
 */
void dh_check_log(const char *path, const json_t *expect_messages, bool allow_open);
/* dh_check_log on the open agent's log against weir_agent_messages(). */
void dh_check(dh *d);
/* Close, check the log, destroy the host, remove the temp dir. */
void dh_teardown(dh *d);

#endif
