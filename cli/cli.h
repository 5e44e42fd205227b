/*
 * cli/cli.h - the `weir` command line: one file per subcommand.
 *
 * It sits beside libweir, not in it: its files include only the public
 * headers (<weir/...>) and this one, and call only libweir's exported API
 * (no weir__ internals).  Calls between its files go one way, down:
 *   main.c         dispatch and config/plugins/hooks/version; calls each
 *                  subcommand's weir_cmd_* and common.c
 *   run.c          calls common.c, compact.c (the REPL's /compact),
 *                  line.c and usage.c
 *   log.c, sessions.c                         call common.c and usage.c
 *   compact.c, send.c, serve.c, worker.c, acp.c  call common.c
 *   common.c, usage.c, line.c, events.c, new_plugin.c
 *                                             call no other file of cli/
 * common.c holds what main.c and log.c used to call of each other (the
 * -c files, the host, escaped messages, exit codes, a session's log path),
 * so no subcommand calls main.c and main.c calls no helper of a subcommand.
 *
 * Exit codes (documented in `weir --help` and docs/cli.md):
 *   0 success, 1 runtime failure (turn error, failed check), 2 usage error,
 *   3 configuration or plugin load error, 4 I/O error (also: the session is
 *   held by another writer, or its lease was taken over: WEIR_E_LEASE_LOST).
 */
#ifndef WEIR_CLI_H
#define WEIR_CLI_H

#include <weir/weir.h>

#define WEIR_EXIT_OK 0
#define WEIR_EXIT_FAIL 1
#define WEIR_EXIT_USAGE 2
#define WEIR_EXIT_CONFIG 3
#define WEIR_EXIT_IO 4

/*
 * The environment variables a command reads, for the end of its --help
 * (docs/cli.md, "Environment").  _BASE: every command; _DEPLOY: a command
 * that composes the deployment config (-c) and loads its plugins; _COLOR:
 * run and resume.  tests/scripts/cli_help.sh checks that every variable the
 * sources read is named.
 */
#define WEIR_CLI_HELP_ENV_BASE                                                             \
    "environment:\n"                                                                      \
    "  WEIR_ALLOW_COREDUMP=1  let a crash write a core dump (it would hold the keys)\n"
#define WEIR_CLI_HELP_ENV_DEPLOY                                                           \
    WEIR_CLI_HELP_ENV_BASE                                                                 \
    "  OPENAI_API_KEY      the default deployment's provider: OpenAI when set,\n"          \
    "  ANTHROPIC_API_KEY   else Anthropic when set, else the scripted demo\n"              \
    "  OPENAI_BASE_URL, ANTHROPIC_BASE_URL  that provider's server (default: the\n"       \
    "                      vendor's; any compatible server works)\n"                       \
    "  WEIR_MODEL          that provider's model (gpt-4o-mini, claude-sonnet-4-5)\n"       \
    "  WEIR_SESSION_DIR    where sessions go (~/.local/state/weir/sessions)\n"             \
    "  WEIR_PLUGIN_PATH    more plugin folders, ':'-separated\n"                           \
    "  WEIR_LOG_LEVEL      plugin log lines shown: error, warn (default), info, debug\n"   \
    "  WEIR_TRACE=1        trace every hook invocation on stderr\n"                        \
    "  WEIR_CHECK_REQUESTS=1  check each request against the log (for tests)\n"           \
    "  HOME                a session.dir that starts with ~/\n"                            \
    "  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,\n"                 \
    "  OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_SERVICE_NAME\n"  \
    "                      the trace collector and service name when telemetry is\n"    \
    "                      enabled and the deployment leaves them out\n"                \
    "  ${VAR} in a -c file reads VAR: examples/deployments read the ones above,\n"        \
    "  LOCAL_BASE_URL (local.json) and MCP_FS_DIR (mcp.json)\n"
#define WEIR_CLI_HELP_ENV_COLOR                                                            \
    "  NO_COLOR, TERM=dumb  no colour on stderr\n"

int weir_cmd_config(int argc, char **argv);
int weir_cmd_plugins(int argc, char **argv);
int weir_cmd_hooks(int argc, char **argv);
int weir_cmd_version(int argc, char **argv);
int weir_cmd_run(int argc, char **argv);    /* cli/run.c */
int weir_cmd_resume(int argc, char **argv); /* cli/run.c */
int weir_cmd_log(int argc, char **argv);    /* cli/log.c */
int weir_cmd_serve(int argc, char **argv);  /* cli/serve.c */
int weir_cmd_compact(int argc, char **argv); /* cli/compact.c */
int weir_cmd_send(int argc, char **argv); /* cli/send.c */
int weir_cmd_worker(int argc, char **argv); /* cli/worker.c */
int weir_cmd_sessions(int argc, char **argv); /* cli/sessions.c */
int weir_cmd_new_plugin(int argc, char **argv); /* cli/new_plugin.c */
int weir_cmd_events(int argc, char **argv); /* cli/events.c */
int weir_cmd_acp(int argc, char **argv);    /* cli/acp.c */

/* One line for a compaction result {kind, message?, pruned?, summaries?,
 * tokens_*?} ("compacted: ...", "declined: ..." on stdout, "failed: ..." on
 * stderr; cli/compact.c, also the REPL's /compact). */
void weir_cli_print_compact(const json_t *result);

/* Shared helpers (cli/common.c). */
/* `v` (any value) as one compact line of JSON (members in order, no
 * newline): malloc'd, or NULL when memory ran out.  Not json_dumps: jansson
 * 2.14 goes on past a key its growing buffer failed to take and reports
 * success, a line that is not JSON. */
char *weir_cli_json_line(const json_t *v);
/*
 * Print one line to stderr: `pre` (the CLI's own terminal codes, a colour or
 * "\r\033[K"; NULL: none), the message of `fmt` with every control
 * character escaped (weir_text_escape: text from plugins, hooks, tools and
 * servers can neither drive the terminal nor start a line of its own),
 * `post` (NULL: none) and "\n".  Every warning, error and status line that
 * carries such text goes through it.  Any thread.
 */
void weir_cli_say(const char *pre, const char *post, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* `text` escaped as weir_cli_say escapes it, into `buf` (`size` bytes, cut
 * between characters); returns `buf`.  For a piece of a line drawn by
 * hand (a status line). */
const char *weir_cli_esc(char *buf, size_t size, const char *text);
/*
 * The status-line contract (docs/plugins.md, "Status lines"): the event's
 * data.status (borrowed) when it is an object with a string `text`, else
 * NULL.  weir run, the REPL and serve show every event that carries one.
 */
const json_t *weir_cli_event_status(const json_t *event);
/*
 * "weir: " + `text` (already escaped) into `buf`, with each "{remaining}"
 * replaced by the seconds `remaining_ms` says ("1.5 s"); a text without one
 * and remaining_ms > 0 gets " (1.5 s)" at its end.  Returns `buf`.
 */
const char *weir_cli_status_line(char *buf, size_t size, const char *text,
                                 long long remaining_ms);
/* Print "weir: <what>: <err->text>" ("weir: <err->text>" when `what` is NULL)
 * to stderr, escaped (weir_cli_say), and map the status to an exit code. */
int weir_cli_fail(const char *what, const weir_error *err);
/* Compose the -c files (none: the default deployment). Exit code on failure. */
int weir_cli_compose(char *const *files, size_t nfiles, json_t **out);
/* The -c FILE options of one command line, in order (strings borrowed from
 * argv), and run's --model and --provider (NULL: as the files say), which
 * weir_cli_session_host sets in the composed config's agent. */
typedef struct weir_cli_files {
    char *files[64];
    size_t n;
    const char *model;    /* agent.model */
    const char *provider; /* agent.provider: a plugin row id */
} weir_cli_files;
/*
 * Append one -c FILE to `f`; when it is full, print "<prog>: too many -c files
 * (at most 64)" to stderr and return WEIR_EXIT_USAGE.  Else WEIR_EXIT_OK.
 */
int weir_cli_add_file(weir_cli_files *f, const char *prog, char *file);
/* Whether the deployment starts from the built-in default: no -c, or a
 * `-c default`. */
bool weir_cli_default_used(const weir_cli_files *f);
/*
 * Load the deployment `config` (stolen) into a new host (*out, the caller
 * destroys it).  With `demo_note` and neither OPENAI_API_KEY nor
 * ANTHROPIC_API_KEY set, first tell stderr that the scripted demo provider
 * stands in.  On failure print "weir: load: ..." and return its exit code.
 */
int weir_cli_host(json_t *config, bool demo_note, weir_host **out);
/* How a session argument names its log (weir_cli_session_path). */
typedef enum weir_cli_target {
    WEIR_CLI_ID,         /* a session id only (run -s, serve -s) */
    WEIR_CLI_ID_OR_PATH, /* a '/' or ".jsonl" makes it a path (log, resume, compact) */
    WEIR_CLI_PATH,       /* a file path (run --log, serve --log) */
    WEIR_CLI_LAST        /* no argument: the newest session (resume --last) */
} weir_cli_target;
/*
 * The log file of a session argument (cli/common.c): as `kind` says,
 * `arg` itself (a path) or <config session.dir>/<arg>.jsonl (a leading "~/"
 * expands to $HOME) for an id, which must pass weir_session_id_valid() (else
 * a usage error naming the argument).  With WEIR_CLI_ID_OR_PATH and the
 * file store, an id no log has exactly may be a unique prefix of one: that
 * session's log; a prefix of several is a usage error listing them.
 * *out is malloc'd.  Exit code.
 */
int weir_cli_session_path(const json_t *config, const char *arg, weir_cli_target kind,
                          char **out);
/* The sessions of the folder `dir` (*out, a new array of {id, path,
 * mtime_ms} in no order; a missing folder has none).  Exit code. */
int weir_cli_session_list(const char *dir, json_t **out);
/* The id of the newest session of the file store's folder, by its last
 * event's time as `weir sessions` orders them (*id malloc'd).  Exit code
 * (another store: usage; none: I/O), the reason said on stderr. */
int weir_cli_session_newest(const json_t *config, char **id);
/*
 * The session header `weir run` records in a new session (*out, new):
 * {deployment:{files:[the -c files as given], config_hash, provider?,
 * model?, rows:[plugin row ids]}, cwd}.  config_hash is a 64-bit FNV-1a of
 * the composed `config` with its secrets redacted (as `weir config`
 * prints it, keys sorted): no secret goes in.  Exit code.
 */
int weir_cli_session_header(const weir_cli_files *files, const json_t *config, json_t **out);
/* "base.json+dev.json" (the base names of the header's files), "(built-in)"
 * for none, "-" for a header without a deployment; returns buf. */
const char *weir_cli_deployment_label(const json_t *header, char *buf, size_t size);
/* The config's session.dir, "~/" expanded (*out malloc'd).  Exit code. */
int weir_cli_session_dir(const json_t *config, char **out);
/*
 * What run, resume and compact do first (cli/common.c): compose the -c
 * files, set the agent's model and provider when `files` names them (a
 * --provider that names no plugin row is a usage error), resolve the session argument `target` (NULL: none, *path stays
 * NULL; read as `kind` says) to its log path (*path, malloc'd), and when `must_exist` names the
 * command, require the file ("<must_exist>: no session log at PATH", exit
 * 4); then load the host (*host).  An exit code; on failure nothing is left
 * to free.
 */
int weir_cli_session_host(const weir_cli_files *files, const char *target, weir_cli_target kind,
                          const char *must_exist, char **path, weir_host **host);

/* The REPL's line editor (cli/line.c). */
/* Token usage and cost summed over assistant/message and assistant/attempt
 * events (cli/usage.c).  Zero-initialise. */
typedef struct weir_cli_usage {
    long long in, cached, written, out; /* uncached input, cache read, cache write, output */
    double usd;                         /* the sum of the events' cost.usd */
    bool any;                           /* some event reported usage */
    bool unpriced;                      /* some event reported usage without a cost */
} weir_cli_usage;
/* Add the usage (and cost) of an assistant/message or assistant/attempt
 * event's `data` (borrowed); nothing when it has no usage. */
void weir_cli_usage_add(weir_cli_usage *u, const json_t *data);
/* Add `u` into `into`. */
void weir_cli_usage_sum(weir_cli_usage *into, const weir_cli_usage *u);
/* `n` with thousands separators ("12,345") into `buf`; returns buf. */
const char *weir_cli_grouped(char *buf, size_t size, long long n);
/* "$0.0123" into `buf`. */
void weir_cli_usage_cost(char *buf, size_t size, double usd);
/* "in 12,345 · cached 10,000 · written 2,000 · out 456 · $0.0123" into `buf`
 * (the cost only when every event with usage had one); returns buf. */
const char *weir_cli_usage_line(char *buf, size_t size, const weir_cli_usage *u);

typedef struct weir_cli_line weir_cli_line;
enum {
    WEIR_CLI_LINE_OK,        /* a line in *out */
    WEIR_CLI_LINE_EOF,       /* Ctrl-D on an empty line, or end of input */
    WEIR_CLI_LINE_INTERRUPT, /* Ctrl-C */
    WEIR_CLI_LINE_ERROR      /* the terminal could not be set up */
};
/* An editor reading terminal `in_fd`, drawing on terminal `out_fd`; NULL when
 * either is not a terminal (or TERM is dumb): read lines plainly then. */
weir_cli_line *weir_cli_line_new(int in_fd, int out_fd);
/* Restores the terminal; NULL is a no-op. */
void weir_cli_line_free(weir_cli_line *l);
/* Read one line after `prompt` (`prompt_cols` columns wide; it may hold
 * colour codes).  *out is malloc'd on WEIR_CLI_LINE_OK, else NULL. */
int weir_cli_line_read(weir_cli_line *l, const char *prompt, size_t prompt_cols, char **out);
/* Append a line to the history (copied; an empty line or a repeat is not). */
void weir_cli_line_history_add(weir_cli_line *l, const char *line);
/* Put the terminal back in the mode it had (before an _exit()).  Any thread. */
void weir_cli_line_restore(void);

/* ---- reading a protocol's lines (serve, acp) ---------------------------- */

/* stdin read ahead, line by line: `fd` the input, `sig_fd` a pipe whose
 * byte (kept in `signal`) stops the read, or -1 for none. */
typedef struct weir_cli_lines {
    int fd, sig_fd;
    char signal;
    char in[4096];
    size_t pos, len;
} weir_cli_lines;

#define WEIR_CLI_LINES_INIT(fd, sig_fd) {(fd), (sig_fd), 0, {0}, 0, 0}
#define WEIR_CLI_LINE_SIGNAL (-2)

/* One line (without its newline) into *buf (grown with realloc, the
 * caller's to free).  Its length; -1 at the end of input with nothing read;
 * WEIR_CLI_LINE_SIGNAL when sig_fd had a byte (the partial line is
 * dropped).  A line longer than `max` (or one that cannot be held) is read
 * to its end and reported through *too_long.  One thread. */
long weir_cli_lines_read(weir_cli_lines *r, size_t max, char **buf, size_t *cap, bool *too_long);

#endif
