/*
 * cli/sessions.c - `weir sessions [-c FILE]... [--json]`: the sessions
 * of the deployment's session directory, newest first, with the id, the
 * last activity, the turns, the size, the state, the tokens and cost, and
 * the first prompt.
 *
 * A log file is read from its head and tail (weir_log_summary: the first
 * prompt, then from its last log/checkpoint on), a store's session by the
 * one reader (weir_host_log_events); a log they refuse (a foreign or
 * damaged file) is listed as "invalid", never skipped silently and never
 * fatal.  A writer's lock is probed with
 * weir_log_writer(), which takes nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define PROMPT_CHARS 40 /* the first prompt, cut to this many characters */
#define DEPLOYMENT_CHARS 20 /* the -c files, cut to this many */
#define CWD_CHARS 24        /* the directory it was created in, cut from the left */

typedef struct session_row {
    char *id, *path;
    long long last_ms; /* last event's time, or the file's mtime */
    long long size, turns, events;
    const char *state; /* "idle", "open turn", "live", "invalid" */
    long pid;          /* the live writer's pid, 0 when unknown */
    char *prompt;      /* the first prompt cut short, or NULL */
    char *error;       /* why the reader refused it, or NULL */
    weir_cli_usage usage; /* its attempts' usage and cost, summed */
    json_t *header;    /* its session/start data (the deployment, the cwd), or NULL */
} session_row;

/* r->id = the first `idlen` bytes of `id`, r->path = "<where><sep><name>"
 * (both malloc'd); false, with neither set, when out of memory. */
static bool row_names(session_row *r, const char *id, size_t idlen, const char *where, char sep,
                      const char *name) {
    size_t plen = strlen(where) + strlen(name) + 2;
    r->id = strndup(id, idlen);
    r->path = malloc(plen);
    if (!r->id || !r->path) {
        free(r->id);
        free(r->path);
        r->id = r->path = NULL;
        return false;
    }
    snprintf(r->path, plen, "%s%c%s", where, sep, name);
    return true;
}

static const char sessions_help[] =
    "usage: weir sessions [-c FILE]... [--json]\n"
    "       weir sessions rm [-c FILE]... ID...\n"
    "       weir sessions prune [-c FILE]... --older-than AGE [--dry-run]\n"
    "\n"
    "List the sessions of the deployment's session directory (-c, or the\n"
    "built-in default: $WEIR_SESSION_DIR or ~/.local/state/weir/sessions),\n"
    "newest first: id, last activity, turns, size, state, tokens and cost (all\n"
    "input, cache and output tokens of its attempts; the cost when the model's\n"
    "price was known for each), the deployment it was created with (its -c\n"
    "files; (built-in) for none; - when an older weir created it), the directory\n"
    "it was created in, and the first prompt.  The state is idle, open\n"
    "turn (left open by a crash: `weir resume ID` closes it), live (a weir process has it open for writing) or invalid\n"
    "(not a weir session log, or a damaged one; `weir log FILE --check` says\n"
    "why).  When session.store names another store (a plugin row such as\n"
    "store-postgres, or \"memory\"), its sessions are listed instead.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay; without -c, or with\n"
    "                      -c default first: the built-in deployment)\n"
    "      --json          one JSON object per session and line: {id, path,\n"
    "                      last_activity (epoch ms), turns, events, size, state,\n"
    "                      pid?, first_prompt?, error?, usage?: {input_tokens,\n"
    "                      cache_read_tokens, cache_write_tokens, output_tokens},\n"
    "                      cost_usd?, deployment?: {files, config_hash, provider?,\n"
    "                      model?, rows}, cwd?}\n"
    "\n"
    "weir sessions rm ID... removes sessions, weir sessions prune --older-than AGE\n"
    "the old ones (--help on each).\n"
    "\n"
    "exit codes: 0 ok (also for no sessions), 2 usage, 3 configuration error,\n"
    "            4 the directory cannot be read\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

/* `text` with whitespace runs as one space, cut to PROMPT_CHARS characters
 * (never inside a UTF-8 sequence) with an ellipsis; malloc'd. */
static char *cut_prompt(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n + 4);
    if (!out)
        return NULL;
    size_t len = 0, chars = 0;
    bool space = false, cut = false;
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            space = len > 0;
            continue;
        }
        bool lead = (c & 0xC0) != 0x80;
        if (lead && chars + (space ? 1 : 0) >= PROMPT_CHARS) {
            cut = true;
            break;
        }
        if (space) {
            out[len++] = ' ';
            chars++;
            space = false;
        }
        out[len++] = (char)c;
        chars += lead;
    }
    if (cut)
        len += (size_t)sprintf(out + len, "\xe2\x80\xa6");
    out[len] = '\0';
    return out;
}

/* Remove a session's log file and, when there is one, the `<log>.held`
 * marker a shutdown that could not log its holds left beside it
 * (docs/generations.md).  0, or -1 with errno (the log's). */
static int remove_log(const char *path) {
    if (unlink(path) != 0)
        return -1;
    char held_path[4200];
    if (snprintf(held_path, sizeof held_path, "%s.held", path) < (int)sizeof held_path)
        (void)unlink(held_path); /* none, most often */
    return 0;
}

/* The text blocks of the first user/message, or NULL. */
static const char *first_prompt(const json_t *events) {
    size_t i, j;
    const json_t *ev, *b;
    json_array_foreach(events, i, ev) {
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (!type || strcmp(type, "user/message") != 0)
            continue;
        const json_t *content =
            json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content");
        if (json_is_string(content))
            return json_string_value(content);
        json_array_foreach(content, j, b) {
            const char *t = json_string_value(json_object_get(b, "text"));
            if (t)
                return t;
        }
        return NULL;
    }
    return NULL;
}

/* Fill `r` from its events as the one reader returned them (NULL with `err`
 * when it refused them); *open: the last turn is open. */
static bool row_events(session_row *r, json_t *events, const weir_error *err, bool *open) {
    if (!events) {
        r->state = "invalid";
        r->error = strdup(err->text[0] ? err->text : weir_strerror((int)err->code));
        return false;
    }
    size_t i;
    const json_t *ev;
    *open = false;
    json_array_foreach(events, i, ev) {
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (type && !strcmp(type, "turn/start")) {
            r->turns++;
            *open = true;
        } else if (type && !strcmp(type, "turn/end")) {
            *open = false;
        } else if (type && (!strcmp(type, "assistant/message") ||
                            !strcmp(type, "assistant/attempt"))) {
            weir_cli_usage_add(&r->usage, json_object_get(ev, "data"));
        }
    }
    r->events = (long long)json_array_size(events);
    const json_t *first = json_array_get(events, 0);
    const char *ftype = json_string_value(json_object_get(first, "type"));
    if (ftype && !strcmp(ftype, "session/start") && json_is_object(json_object_get(first, "data")))
        r->header = json_incref(json_object_get(first, "data"));
    const json_t *last = json_array_get(events, json_array_size(events) - 1);
    if (json_is_integer(json_object_get(last, "time")))
        r->last_ms = (long long)json_integer_value(json_object_get(last, "time"));
    const char *prompt = first_prompt(events);
    r->prompt = prompt ? cut_prompt(prompt) : NULL;
    return true;
}

/* A session of a store other than files: its events through the host, its
 * size as the bytes of its events, live from the store's list entry. */
static void read_store_row(session_row *r, const weir_host *host, const json_t *entry) {
    json_t *events = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_host_log_events(host, r->id, &events, &err) != WEIR_OK)
        events = NULL;
    bool open = false;
    if (!row_events(r, events, &err, &open))
        return;
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) r->size += (long long)json_dumpb(ev, NULL, 0, JSON_COMPACT) + 1;
    json_decref(events);
    const json_t *pid = json_object_get(entry, "pid");
    r->pid = json_is_integer(pid) ? (long)json_integer_value(pid) : 0;
    r->state = json_is_true(json_object_get(entry, "live")) ? "live"
               : open                                        ? "open turn"
                                                             : "idle";
}

static void read_row(session_row *r, const struct stat *sb) {
    r->size = (long long)sb->st_size;
    r->last_ms = (long long)sb->st_mtim.tv_sec * 1000 + sb->st_mtim.tv_nsec / 1000000;
    json_t *sum = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_log_summary(r->path, &sum, &err) != WEIR_OK) {
        r->state = "invalid";
        r->error = strdup(err.text[0] ? err.text : weir_strerror((int)err.code));
        return;
    }
    r->events = (long long)json_integer_value(json_object_get(sum, "events"));
    r->turns = (long long)json_integer_value(json_object_get(sum, "turns"));
    const json_t *last = json_object_get(sum, "last_time");
    if (json_is_integer(last))
        r->last_ms = (long long)json_integer_value(last);
    const char *prompt = json_string_value(json_object_get(sum, "first_prompt"));
    r->prompt = prompt ? cut_prompt(prompt) : NULL;
    weir_cli_usage_add(&r->usage, sum); /* {usage, cost}, as an event's data */
    r->header = json_incref(json_object_get(sum, "header"));
    bool open = json_is_true(json_object_get(sum, "open"));
    json_decref(sum);
    bool live = false;
    weir_error_clear(&err);
    if (weir_log_writer(r->path, &live, &r->pid, &err) == WEIR_OK && live)
        r->state = "live";
    else
        r->state = open ? "open turn" : "idle";
}

static int newest_first(const void *a, const void *b) {
    const session_row *x = a, *y = b;
    if (x->last_ms != y->last_ms)
        return x->last_ms < y->last_ms ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* "4.1K": a size in at most five columns. */
static void human_size(long long n, char *out, size_t size) {
    static const char units[] = "BKMGT";
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, size, "%lldB", n);
    else
        snprintf(out, size, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

/* "24.5K", "1.2M", "812": a token count in a few columns. */
static void human_count(long long n, char *out, size_t size) {
    if (n < 1000)
        snprintf(out, size, "%lld", n);
    else if (n < 1000000)
        snprintf(out, size, n < 10000 ? "%.1fK" : "%.0fK", (double)n / 1e3);
    else
        snprintf(out, size, n < 10000000 ? "%.1fM" : "%.0fM", (double)n / 1e6);
}

/* The characters (not bytes) of UTF-8 `s`. */
static size_t chars(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* The printf width that pads `s` to `cols` characters. */
static int pad(const char *s, int cols) {
    return cols + (int)(strlen(s) - chars(s));
}

/* `text` in `buf`, cut to `cols` characters with an ellipsis: at its end,
 * or (`left`) at its start, where a path's beginning matters least. */
static void fit(const char *text, char *buf, size_t size, size_t cols, bool left) {
    size_t n = chars(text);
    if (n <= cols) {
        if (buf != text)
            snprintf(buf, size, "%s", text);
        return;
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", text);
    const char *p = tmp;
    if (left) {
        for (size_t skip = n - (cols - 1); skip > 0; p++)
            skip -= ((unsigned char)p[1] & 0xC0) != 0x80;
        snprintf(buf, size, "\xe2\x80\xa6%s", p);
        return;
    }
    size_t k = 0, c = 0;
    while (tmp[k] && c < cols - 1) {
        k++;
        c += ((unsigned char)tmp[k] & 0xC0) != 0x80;
    }
    snprintf(buf, size, "%.*s\xe2\x80\xa6", (int)k, tmp);
}

/* The cwd a session was created in, $HOME as "~", cut to CWD_CHARS from the
 * left; "-" when it recorded none. */
static void home_cwd(const char *cwd, char *buf, size_t size) {
    if (!cwd) {
        snprintf(buf, size, "-");
        return;
    }
    const char *home = getenv("HOME");
    size_t hn = home ? strlen(home) : 0;
    char tmp[1024];
    if (hn > 1 && !strncmp(cwd, home, hn) && (cwd[hn] == '/' || !cwd[hn]))
        snprintf(tmp, sizeof tmp, "~%s", cwd + hn);
    else
        snprintf(tmp, sizeof tmp, "%s", cwd);
    weir_cli_esc(buf, size, tmp); /* a directory name may hold anything */
    fit(buf, buf, size, CWD_CHARS, true);
}

static void print_row(const session_row *r, bool json) {
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "id", r->id, "path", r->path,
                              "last_activity", (json_int_t)r->last_ms, "turns",
                              (json_int_t)r->turns, "events", (json_int_t)r->events, "size",
                              (json_int_t)r->size, "state", r->state);
        if (o && r->pid > 0)
            json_object_set_new(o, "pid", json_integer(r->pid));
        if (o && r->prompt)
            json_object_set_new(o, "first_prompt", json_string(r->prompt));
        if (o && r->error)
            json_object_set_new(o, "error", json_string(r->error));
        if (o && r->usage.any)
            json_object_set_new(o, "usage",
                                json_pack("{s:I, s:I, s:I, s:I}", "input_tokens",
                                          (json_int_t)r->usage.in, "cache_read_tokens",
                                          (json_int_t)r->usage.cached, "cache_write_tokens",
                                          (json_int_t)r->usage.written, "output_tokens",
                                          (json_int_t)r->usage.out));
        if (o && r->usage.any && !r->usage.unpriced)
            json_object_set_new(o, "cost_usd", json_real(r->usage.usd));
        const json_t *dep = json_object_get(r->header, "deployment");
        if (o && json_is_object(dep))
            json_object_set_new(o, "deployment", json_deep_copy(dep));
        if (o && json_is_string(json_object_get(r->header, "cwd")))
            json_object_set_new(o, "cwd", json_deep_copy(json_object_get(r->header, "cwd")));
        char *line = weir_cli_json_line(o);
        if (line)
            puts(line);
        free(line);
        json_decref(o);
        return;
    }
    char when[32] = "?", size[16];
    time_t t = (time_t)(r->last_ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    human_size(r->size, size, sizeof size);
    char turns[24] = "-";
    if (strcmp(r->state, "invalid") != 0)
        snprintf(turns, sizeof turns, "%lld", r->turns);
    /* tokens: all four counts summed ("24.5K"), and the cost when every
     * attempt was priced */
    char usage[48] = "-";
    if (r->usage.any) {
        char tokens[24], cost[24] = "";
        human_count(r->usage.in + r->usage.cached + r->usage.written + r->usage.out, tokens,
                    sizeof tokens);
        if (!r->usage.unpriced)
            weir_cli_usage_cost(cost, sizeof cost, r->usage.usd);
        snprintf(usage, sizeof usage, "%s%s%s", tokens, cost[0] ? " " : "", cost);
    }
    char dep[DEPLOYMENT_CHARS * 4 + 8], cwd[CWD_CHARS * 4 + 8];
    fit(weir_cli_deployment_label(r->header, dep, sizeof dep), dep, sizeof dep, DEPLOYMENT_CHARS,
        false);
    home_cwd(json_string_value(json_object_get(r->header, "cwd")), cwd, sizeof cwd);
    printf("%-24s %-16s %5s %6s  %-9s  %-15s  %-*s  %-*s  %s\n", r->id, when, turns, size,
           r->state, usage, pad(dep, DEPLOYMENT_CHARS), dep, pad(cwd, CWD_CHARS), cwd,
           r->prompt ? r->prompt : r->error ? r->error : "");
}

static void row_free(session_row *r) {
    free(r->id);
    free(r->path);
    free(r->prompt);
    free(r->error);
    json_decref(r->header);
}

/* Print rows[0..n) newest first (and free them). */
static void print_rows(session_row *rows, size_t n, bool json) {
    qsort(rows, n, sizeof *rows, newest_first);
    if (n && !json)
        printf("%-24s %-16s %5s %6s  %-9s  %-15s  %-*s  %-*s  %s\n", "ID", "LAST ACTIVITY",
               "TURNS", "SIZE", "STATE", "TOKENS/COST", DEPLOYMENT_CHARS, "DEPLOYMENT", CWD_CHARS,
               "CWD", "FIRST PROMPT");
    for (size_t i = 0; i < n; i++) {
        print_row(&rows[i], json);
        row_free(&rows[i]);
    }
}

/* The sessions of the store session.store names (takes `config`). */
static int store_sessions(json_t *config, const char *store_name, bool json) {
    char *store = strdup(store_name); /* config goes with the host */
    weir_host *host = NULL;
    int rc = store ? weir_cli_host(config, false, &host) : (json_decref(config), WEIR_EXIT_FAIL);
    if (rc != WEIR_EXIT_OK) {
        free(store);
        return rc;
    }
    json_t *list = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_host_sessions(host, &list, &err) != WEIR_OK) {
        rc = weir_cli_fail("sessions", &err);
        weir_host_destroy(host);
        free(store);
        return rc;
    }
    size_t n = json_array_size(list), k = 0;
    session_row *rows = calloc(n ? n : 1, sizeof *rows);
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (!rows || !id || !weir_session_id_valid(id))
            continue; /* a store's row that is no session id is not one of ours */
        session_row *r = &rows[k];
        if (!row_names(r, id, strlen(id), store, ':', id)) {
            rc = WEIR_EXIT_FAIL;
            break;
        }
        read_store_row(r, host, e);
        k++;
    }
    if (!rows || rc != WEIR_EXIT_OK)
        fprintf(stderr, "weir sessions: out of memory\n");
    if (rows)
        print_rows(rows, k, json);
    if (!k && rows && rc == WEIR_EXIT_OK)
        fprintf(stderr, "weir sessions: no sessions in store %s\n", store);
    free(rows);
    json_decref(list);
    weir_host_destroy(host);
    free(store);
    return rows ? rc : WEIR_EXIT_FAIL;
}

static const char rm_help[] =
    "usage: weir sessions rm [-c FILE]... ID...\n"
    "\n"
    "Remove sessions of the deployment's session folder: each ID is a session\n"
    "id or a unique prefix of one (a prefix of several is an error that lists\n"
    "them; an exact id always wins).  Every ID is checked before anything is\n"
    "removed.  A session a weir process has open for writing is refused\n"
    "(exit 4) and kept.  The file store only: a shared store's sessions are\n"
    "deleted in the store (docs/stores.md).\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay)\n"
    "\n"
    "exit codes: 0 removed, 1 the store cannot remove sessions, 2 usage (also\n"
    "            an ambiguous prefix), 3 configuration error, 4 no such session,\n"
    "            one open for writing, or a file that cannot be removed\n";

static const char prune_help[] =
    "usage: weir sessions prune [-c FILE]... --older-than AGE [--dry-run]\n"
    "\n"
    "Remove the sessions of the deployment's session folder whose last activity\n"
    "(the last event's time, as `weir sessions` shows it) is older than AGE:\n"
    "a number and a unit, s, m, h, d or w (30d, 12h, 90m).  Each one removed is\n"
    "printed (\"removed ID (last activity ...)\"); a session open for writing and\n"
    "a file that is not a weir log are kept.  The file store only.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay)\n"
    "      --older-than AGE  required: the age, e.g. 30d\n"
    "      --dry-run       print what would be removed (\"would remove ...\"), remove nothing\n"
    "\n"
    "exit codes: 0 ok (also when nothing was old enough), 1 the store cannot\n"
    "            remove sessions, 2 usage, 3 configuration error, 4 a file\n"
    "            that cannot be removed\n";

/* The session folder of the -c files (*dir, malloc'd) when the deployment
 * keeps files; else say the store cannot do `what`.  Exit code. */
static int file_store_dir(const weir_cli_files *files, const char *what, json_t **config,
                          char **dir) {
    *dir = NULL;
    int rc = weir_cli_compose(files->files, files->n, config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    const char *store =
        json_string_value(json_object_get(json_object_get(*config, "session"), "store"));
    if (store && strcmp(store, "file") != 0) {
        fprintf(stderr,
                "weir sessions %s: session.store '%s' cannot remove sessions here (the file store "
                "can): %s\n",
                what, store,
                !strcmp(store, "memory") ? "a memory session ends with its process"
                                         : "delete them in the store itself (docs/stores.md)");
        json_decref(*config);
        *config = NULL;
        return WEIR_EXIT_FAIL;
    }
    if ((rc = weir_cli_session_dir(*config, dir)) != WEIR_EXIT_OK) {
        json_decref(*config);
        *config = NULL;
    }
    return rc;
}

/* Whether a writer holds the log at `path` (*pid its pid, 0 when unknown). */
static bool held(const char *path, long *pid) {
    bool live = false;
    weir_error err;
    weir_error_clear(&err);
    *pid = 0;
    return weir_log_writer(path, &live, pid, &err) == WEIR_OK && live;
}

static int sessions_rm(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir sessions rm", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'h':
            fputs(rm_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(rm_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "weir sessions rm: missing session ID\n\n%s", rm_help);
        return WEIR_EXIT_USAGE;
    }
    for (int i = optind; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (strchr(argv[i], '/') || (n > 6 && !strcmp(argv[i] + n - 6, ".jsonl")) ||
            !weir_session_id_valid(argv[i])) {
            fprintf(stderr, "weir sessions rm: '%.200s' is not a session id (give an id or a "
                            "prefix of one, not a path)\n",
                    argv[i]);
            return WEIR_EXIT_USAGE;
        }
    }
    json_t *config = NULL;
    char *dir = NULL;
    int rc = file_store_dir(&files, "rm", &config, &dir);
    if (rc != WEIR_EXIT_OK)
        return rc;
    /* every argument resolved before anything goes */
    int nargs = argc - optind;
    char **paths = calloc((size_t)nargs, sizeof *paths);
    if (!paths)
        rc = WEIR_EXIT_FAIL;
    for (int i = 0; rc == WEIR_EXIT_OK && i < nargs; i++) {
        rc = weir_cli_session_path(config, argv[optind + i], WEIR_CLI_ID_OR_PATH, &paths[i]);
        struct stat sb;
        if (rc == WEIR_EXIT_OK && (stat(paths[i], &sb) != 0 || !S_ISREG(sb.st_mode))) {
            fprintf(stderr, "weir sessions rm: no session '%s' in %s\n", argv[optind + i], dir);
            rc = WEIR_EXIT_IO;
        }
    }
    for (int i = 0; rc == WEIR_EXIT_OK && i < nargs; i++) {
        const char *base = strrchr(paths[i], '/') + 1;
        int idlen = (int)(strlen(base) - 6);
        long pid = 0;
        if (held(paths[i], &pid)) {
            fprintf(stderr,
                    "weir sessions rm: session %.*s is open for writing by pid %ld; not removed\n",
                    idlen, base, pid);
            rc = WEIR_EXIT_IO;
        } else if (remove_log(paths[i]) != 0) {
            fprintf(stderr, "weir sessions rm: %s: %s\n", paths[i], strerror(errno));
            rc = WEIR_EXIT_IO;
        } else {
            printf("removed %.*s (%s)\n", idlen, base, paths[i]);
        }
    }
    for (int i = 0; paths && i < nargs; i++)
        free(paths[i]);
    free(paths);
    if (rc == WEIR_EXIT_FAIL)
        fprintf(stderr, "weir sessions rm: out of memory\n");
    json_decref(config);
    free(dir);
    return rc;
}

/* "30d" as milliseconds into *ms; false when it is not a number and a unit. */
static bool parse_age(const char *s, long long *ms) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || n < 0 || !end[0] || end[1])
        return false;
    long long unit = end[0] == 's' ? 1000LL
                     : end[0] == 'm' ? 60000LL
                     : end[0] == 'h' ? 3600000LL
                     : end[0] == 'd' ? 86400000LL
                     : end[0] == 'w' ? 604800000LL
                                     : 0;
    if (!unit || n > LLONG_MAX / unit)
        return false;
    *ms = n * unit;
    return true;
}

static int sessions_prune(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"older-than", required_argument, NULL, 'o'},
                                              {"dry-run", no_argument, NULL, 'n'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    const char *age = NULL;
    bool dry = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir sessions prune", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'o':
            age = optarg;
            break;
        case 'n':
            dry = true;
            break;
        case 'h':
            fputs(prune_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(prune_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    long long age_ms = 0;
    if (!age || !parse_age(age, &age_ms)) {
        if (age)
            fprintf(stderr, "weir sessions prune: --older-than '%s': expected a number and a "
                            "unit (s, m, h, d, w), e.g. 30d\n",
                    age);
        else
            fprintf(stderr, "weir sessions prune: --older-than AGE is required\n\n%s",
                    prune_help);
        return WEIR_EXIT_USAGE;
    }
    if (optind < argc) {
        fprintf(stderr, "weir sessions prune: unexpected argument '%s'\n", argv[optind]);
        return WEIR_EXIT_USAGE;
    }
    json_t *config = NULL;
    char *dir = NULL;
    int rc = file_store_dir(&files, "prune", &config, &dir);
    if (rc != WEIR_EXIT_OK)
        return rc;
    json_decref(config);
    json_t *list = NULL;
    if ((rc = weir_cli_session_list(dir, &list)) != WEIR_EXIT_OK) {
        fprintf(stderr, "weir sessions prune: cannot read %s: %s\n", dir, strerror(errno));
        free(dir);
        return rc;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long cutoff = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 - age_ms;
    size_t i, removed = 0;
    const json_t *e;
    json_array_foreach(list, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));
        const char *path = json_string_value(json_object_get(e, "path"));
        json_t *sum = NULL;
        weir_error err;
        weir_error_clear(&err);
        if (weir_log_summary(path, &sum, &err) != WEIR_OK) {
            fprintf(stderr, "weir sessions prune: kept %s: not a weir session log (%s)\n", id,
                    err.text);
            continue; /* never another program's file */
        }
        const json_t *lt = json_object_get(sum, "last_time");
        long long last = json_is_integer(lt) ? (long long)json_integer_value(lt)
                                             : (long long)json_integer_value(
                                                   json_object_get(e, "mtime_ms"));
        json_decref(sum);
        if (last >= cutoff)
            continue;
        char when[32] = "?";
        time_t t = (time_t)(last / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        long pid = 0;
        if (held(path, &pid)) {
            fprintf(stderr, "weir sessions prune: kept %s: open for writing by pid %ld\n", id,
                    pid);
        } else if (dry) {
            printf("would remove %s (last activity %s)\n", id, when);
            removed++;
        } else if (remove_log(path) != 0) {
            fprintf(stderr, "weir sessions prune: %s: %s\n", path, strerror(errno));
            rc = WEIR_EXIT_IO;
        } else {
            printf("removed %s (last activity %s)\n", id, when);
            removed++;
        }
    }
    fprintf(stderr, "weir sessions prune: %s %zu session%s older than %s in %s\n",
            dry ? "would remove" : "removed", removed, removed == 1 ? "" : "s", age, dir);
    json_decref(list);
    free(dir);
    return rc;
}

int weir_cmd_sessions(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "rm"))
        return sessions_rm(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "prune"))
        return sessions_prune(argc - 1, argv + 1);
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"json", no_argument, NULL, 'j'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    bool json = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir sessions", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            fputs(sessions_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(sessions_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "weir sessions: unexpected argument '%s'\n", argv[optind]);
        return WEIR_EXIT_USAGE;
    }
    json_t *config = NULL;
    int rc = weir_cli_compose(files.files, files.n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    if (store && strcmp(store, "file") != 0)
        return store_sessions(config, store, json);
    char *dir = NULL;
    rc = weir_cli_session_dir(config, &dir);
    json_decref(config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    DIR *d = opendir(dir);
    if (!d) {
        bool missing = errno == ENOENT;
        if (missing)
            fprintf(stderr, "weir sessions: no sessions yet (%s does not exist)\n", dir);
        else
            fprintf(stderr, "weir sessions: cannot read %s: %s\n", dir, strerror(errno));
        free(dir);
        return missing ? WEIR_EXIT_OK : WEIR_EXIT_IO;
    }
    session_row *rows = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    rc = WEIR_EXIT_OK;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 6 || strcmp(e->d_name + len - 6, ".jsonl") != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            session_row *nr = realloc(rows, ncap * sizeof *rows);
            if (!nr) {
                rc = WEIR_EXIT_FAIL;
                break;
            }
            rows = nr;
            cap = ncap;
        }
        session_row *r = &rows[n];
        memset(r, 0, sizeof *r);
        if (!row_names(r, e->d_name, len - 6, dir, '/', e->d_name)) {
            rc = WEIR_EXIT_FAIL;
            break;
        }
        struct stat sb;
        if (stat(r->path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            row_free(r);
            continue;
        }
        read_row(r, &sb);
        n++;
    }
    closedir(d);
    if (rc != WEIR_EXIT_OK)
        fprintf(stderr, "weir sessions: out of memory\n");
    print_rows(rows, n, json);
    if (!n && rc == WEIR_EXIT_OK)
        fprintf(stderr, "weir sessions: no sessions in %s\n", dir);
    free(rows);
    free(dir);
    return rc;
}
