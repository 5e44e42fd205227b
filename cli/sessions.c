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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

#define PROMPT_CHARS 40 /* the first prompt, cut to this many characters */

typedef struct session_row {
    char *id, *path;
    long long last_ms; /* last event's time, or the file's mtime */
    long long size, turns, events;
    const char *state; /* "idle", "open turn", "live", "invalid" */
    long pid;          /* the live writer's pid, 0 when unknown */
    char *prompt;      /* the first prompt cut short, or NULL */
    char *error;       /* why the reader refused it, or NULL */
    weir_cli_usage usage; /* its attempts' usage and cost, summed */
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
    "\n"
    "List the sessions of the deployment's session directory (-c, or the\n"
    "built-in default: $WEIR_SESSION_DIR or ~/.local/state/weir/sessions),\n"
    "newest first: id, last activity, turns, size, state, tokens and cost (all\n"
    "input, cache and output tokens of its attempts; the cost when the model's\n"
    "price was known for each) and the first prompt.  The state is idle, open\n"
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
    "                      cost_usd?}\n"
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
    printf("%-24s %-16s %5s %6s  %-9s  %-15s  %s\n", r->id, when, turns, size, r->state, usage,
           r->prompt ? r->prompt : r->error ? r->error : "");
}

/* Print rows[0..n) newest first (and free them). */
static void print_rows(session_row *rows, size_t n, bool json) {
    qsort(rows, n, sizeof *rows, newest_first);
    if (n && !json)
        printf("%-24s %-16s %5s %6s  %-9s  %-15s  %s\n", "ID", "LAST ACTIVITY", "TURNS", "SIZE",
               "STATE", "TOKENS/COST", "FIRST PROMPT");
    for (size_t i = 0; i < n; i++) {
        print_row(&rows[i], json);
        free(rows[i].id);
        free(rows[i].path);
        free(rows[i].prompt);
        free(rows[i].error);
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

int weir_cmd_sessions(int argc, char **argv) {
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
            free(r->id);
            free(r->path);
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
