/*
 * cli/common.c - the helpers every subcommand shares: JSON lines, escaped
 * messages and exit codes, the -c files, the host, and the log path of a
 * session argument.  It calls only the public API (and libc, jansson), never
 * another file of cli/: main.c and the subcommands call it (see cli/cli.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

char *weir_cli_json_line(const json_t *v) {
    /* measured, then written into a buffer that fits: jansson's fixed-buffer
     * writer cannot fail, so no key can go missing */
    size_t n = v ? json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
    char *line = n ? malloc(n + 1) : NULL;
    if (line && json_dumpb(v, line, n, JSON_COMPACT | JSON_ENCODE_ANY) != n) {
        free(line);
        line = NULL;
    }
    if (line)
        line[n] = '\0';
    return line;
}

void weir_cli_say(const char *pre, const char *post, const char *fmt, ...) {
    char small[1024], esc_small[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    char *msg = small;
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    } else if (n < 0 || !msg) {
        msg = small; /* no memory for the whole line: the part that fit */
    }
    size_t len = weir_text_escape(NULL, 0, msg);
    char *esc = len < sizeof esc_small ? esc_small : malloc(len + 1);
    if (!esc) {
        esc = esc_small; /* cut */
        len = sizeof esc_small - 1;
    }
    weir_text_escape(esc, len + 1, msg);
    flockfile(stderr); /* one line, not mixed with another thread's */
    fputs(pre ? pre : "", stderr);
    fputs(esc, stderr);
    fputs(post ? post : "", stderr);
    fputc('\n', stderr);
    fflush(stderr);
    funlockfile(stderr);
    if (esc != esc_small)
        free(esc);
    if (msg != small)
        free(msg);
}

const char *weir_cli_esc(char *buf, size_t size, const char *text) {
    weir_text_escape(buf, size, text);
    return buf;
}

const json_t *weir_cli_event_status(const json_t *event) {
    const json_t *status = json_object_get(json_object_get(event, "data"), "status");
    return json_is_object(status) && json_is_string(json_object_get(status, "text")) ? status
                                                                                     : NULL;
}

const char *weir_cli_status_line(char *buf, size_t size, const char *text,
                                 long long remaining_ms) {
    char secs[32];
    snprintf(secs, sizeof secs, "%.1f s", (double)(remaining_ms > 0 ? remaining_ms : 0) / 1000.0);
    size_t at = (size_t)snprintf(buf, size, "weir: ");
    bool counted = false;
    for (const char *t = text; *t && at + 1 < size;) {
        if (!strncmp(t, "{remaining}", 11)) {
            at += (size_t)snprintf(buf + at, size - at, "%s", secs);
            t += 11;
            counted = true;
        } else {
            buf[at++] = *t++;
            buf[at] = '\0';
        }
    }
    if (at >= size)
        at = size - 1;
    if (!counted && remaining_ms > 0 && at + 1 < size)
        snprintf(buf + at, size - at, " (%s)", secs);
    return buf;
}

int weir_cli_fail(const char *what, const weir_error *err) {
    weir_cli_say(NULL, NULL, "weir: %s%s%s", what ? what : "", what ? ": " : "",
                 err && err->text[0] ? err->text : weir_strerror(err ? (int)err->code : 0));
    if (!err)
        return WEIR_EXIT_FAIL;
    switch (err->code) {
    case WEIR_E_IO:
    case WEIR_E_BUSY:
    case WEIR_E_LEASE_LOST: /* another writer took the session over */
        return WEIR_EXIT_IO;
    case WEIR_E_CONFIG:
    case WEIR_E_PLUGIN_OPEN:
    case WEIR_E_PLUGIN_ENTRY:
    case WEIR_E_PLUGIN_ABI:
    case WEIR_E_PLUGIN_INIT:
    case WEIR_E_PLUGIN_CONFIG:
    case WEIR_E_DUPLICATE:
    case WEIR_E_TOO_LATE:
    case WEIR_E_HOOK_ORDER:
        return WEIR_EXIT_CONFIG;
    default:
        return WEIR_EXIT_FAIL;
    }
}

int weir_cli_compose(char *const *files, size_t nfiles, json_t **out) {
    weir_error err;
    weir_error_clear(&err);
    /* the text names the file already ("config base.json: ...") */
    if (weir_config_compose((const char *const *)files, nfiles, out, &err) != WEIR_OK)
        return weir_cli_fail(NULL, &err);
    return WEIR_EXIT_OK;
}

int weir_cli_add_file(weir_cli_files *f, const char *prog, char *file) {
    if (f->n == sizeof f->files / sizeof f->files[0]) {
        fprintf(stderr, "%s: too many -c files (at most 64)\n", prog);
        return WEIR_EXIT_USAGE;
    }
    f->files[f->n++] = file;
    return WEIR_EXIT_OK;
}

bool weir_cli_default_used(const weir_cli_files *f) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->files[i], WEIR_CONFIG_DEFAULT_NAME) == 0)
            return true;
    return f->n == 0;
}

int weir_cli_host(json_t *config, bool demo_note, weir_host **out) {
    const char *okey = getenv("OPENAI_API_KEY"), *akey = getenv("ANTHROPIC_API_KEY");
    if (demo_note && (!okey || !*okey) && (!akey || !*akey))
        fputs("weir: no OPENAI_API_KEY or ANTHROPIC_API_KEY set; using the built-in scripted "
              "demo provider\n",
              stderr);
    weir_error err;
    weir_error_clear(&err);
    weir_status st = weir_host_create(config, out, &err);
    json_decref(config);
    return st == WEIR_OK ? WEIR_EXIT_OK : weir_cli_fail("load", &err);
}

/* --model and --provider: into the config's agent (the provider must be a
 * plugin row's id).  An exit code. */
static int set_route(json_t *config, const weir_cli_files *files) {
    json_t *agent = json_object_get(config, "agent");
    if (!files->model && !files->provider)
        return WEIR_EXIT_OK;
    if (!json_is_object(agent)) {
        fprintf(stderr, "weir: the deployment config has no agent object\n");
        return WEIR_EXIT_CONFIG;
    }
    if (files->provider) {
        char rows[512] = "";
        size_t i, len = 0;
        const json_t *row;
        bool found = false;
        json_array_foreach(json_object_get(config, "plugins"), i, row) {
            const char *id = json_string_value(json_object_get(row, "id"));
            if (!id)
                continue;
            found = found || !strcmp(id, files->provider);
            if (len < sizeof rows)
                len += (size_t)snprintf(rows + len, sizeof rows - len, "%s%s", len ? ", " : "",
                                        id);
        }
        if (!found) {
            weir_cli_say(NULL, NULL,
                         "weir: --provider %s: the deployment has no plugin row with that id "
                         "(its rows: %s)",
                         files->provider, rows[0] ? rows : "none");
            return WEIR_EXIT_USAGE;
        }
    }
    if ((files->model && json_object_set_new(agent, "model", json_string(files->model)) != 0) ||
        (files->provider &&
         json_object_set_new(agent, "provider", json_string(files->provider)) != 0)) {
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    return WEIR_EXIT_OK;
}

/* 64-bit FNV-1a of `n` bytes. */
static uint64_t fnv1a64(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int weir_cli_session_header(const weir_cli_files *files, const json_t *config, json_t **out) {
    *out = NULL;
    /* the hash is of the config as `weir config` prints it: secrets are
     * "***", so a key never reaches the log, and a new key is no change */
    json_t *red = json_deep_copy(config);
    weir_error err;
    weir_error_clear(&err);
    if (!red || weir_config_redact(red, &err) != WEIR_OK) {
        json_decref(red);
        return weir_cli_fail("session header", &err);
    }
    size_t n = json_dumpb(red, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
    char *text = n ? malloc(n) : NULL;
    bool dumped = text && json_dumpb(red, text, n, JSON_COMPACT | JSON_SORT_KEYS) == n;
    json_decref(red);
    char hash[32];
    if (dumped)
        snprintf(hash, sizeof hash, "fnv1a64:%016llx", (unsigned long long)fnv1a64(text, n));
    free(text);
    json_t *h = dumped ? json_pack("{s:{s:[], s:s, s:[]}}", "deployment", "files", "config_hash",
                                   hash, "rows")
                       : NULL;
    json_t *dep = json_object_get(h, "deployment");
    json_t *given = json_object_get(dep, "files"), *rows = json_object_get(dep, "rows");
    bool ok = h != NULL;
    for (size_t i = 0; ok && i < files->n; i++)
        ok = json_array_append_new(given, json_string(files->files[i])) == 0;
    const json_t *agent = json_object_get(config, "agent");
    static const char *const keys[] = {"provider", "model"};
    for (size_t i = 0; ok && i < 2; i++) {
        const char *v = json_string_value(json_object_get(agent, keys[i]));
        if (v)
            ok = json_object_set_new(dep, keys[i], json_string(v)) == 0;
    }
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        const char *id = json_string_value(json_object_get(row, "id"));
        if (ok && id && !json_is_true(json_object_get(row, "disabled")))
            ok = json_array_append_new(rows, json_string(id)) == 0;
    }
    char cwd[4096];
    if (ok && getcwd(cwd, sizeof cwd))
        ok = json_object_set_new(h, "cwd", json_string(cwd)) == 0;
    if (!ok) {
        json_decref(h);
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    *out = h;
    return WEIR_EXIT_OK;
}

const char *weir_cli_deployment_label(const json_t *header, char *buf, size_t size) {
    const json_t *files = json_object_get(json_object_get(header, "deployment"), "files");
    if (!json_is_array(files)) {
        snprintf(buf, size, "-");
        return buf;
    }
    if (json_array_size(files) == 0) {
        snprintf(buf, size, "(built-in)");
        return buf;
    }
    size_t len = 0, i;
    const json_t *f;
    buf[0] = '\0';
    json_array_foreach(files, i, f) {
        const char *name = json_string_value(f);
        const char *base = name ? strrchr(name, '/') : NULL;
        if (len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "+" : "",
                                    base ? base + 1 : name ? name : "?");
    }
    return buf;
}

int weir_cli_session_host(const weir_cli_files *files, const char *target, weir_cli_target kind,
                          const char *must_exist, char **path, weir_host **host) {
    *path = NULL;
    *host = NULL;
    json_t *config = NULL;
    int rc = weir_cli_compose(files->files, files->n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    if ((rc = set_route(config, files)) != WEIR_EXIT_OK) {
        json_decref(config);
        return rc;
    }
    char *newest = NULL;
    if (kind == WEIR_CLI_LAST) { /* --last: the newest session of the folder */
        if ((rc = weir_cli_session_newest(config, &newest)) != WEIR_EXIT_OK) {
            json_decref(config);
            return rc;
        }
        target = newest;
        kind = WEIR_CLI_ID;
    }
    if (target) {
        rc = weir_cli_session_path(config, target, kind, path);
        free(newest);
        if (rc != WEIR_EXIT_OK) {
            json_decref(config);
            return rc;
        }
        /* a log file must exist; a session in another store (session.store
         * names a plugin row or "memory") is found by the store when the
         * agent opens it */
        const char *store =
            json_string_value(json_object_get(json_object_get(config, "session"), "store"));
        bool file_store = !store || strcmp(store, "file") == 0;
        struct stat sb;
        if (must_exist && file_store && stat(*path, &sb) != 0) {
            fprintf(stderr, "%s: no session log at %s\n", must_exist, *path);
            free(*path);
            *path = NULL;
            json_decref(config);
            return WEIR_EXIT_IO;
        }
    }
    if ((rc = weir_cli_host(config, weir_cli_default_used(files), host)) != WEIR_EXIT_OK) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

/* Whether the deployment keeps its sessions as log files (session.store
 * absent or "file"). */
static bool file_store(const json_t *config) {
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    return !store || strcmp(store, "file") == 0;
}

int weir_cli_session_list(const char *dir, json_t **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? ((*out = json_array()) ? WEIR_EXIT_OK : WEIR_EXIT_FAIL)
                               : WEIR_EXIT_IO;
    json_t *list = json_array();
    struct dirent *e;
    int rc = list ? WEIR_EXIT_OK : WEIR_EXIT_FAIL;
    while (rc == WEIR_EXIT_OK && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 6 || strcmp(e->d_name + len - 6, ".jsonl") != 0)
            continue;
        char id[256];
        if (len - 6 >= sizeof id)
            continue;
        memcpy(id, e->d_name, len - 6);
        id[len - 6] = '\0';
        if (!weir_session_id_valid(id))
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
            rc = WEIR_EXIT_FAIL;
            break;
        }
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            json_t *row = json_pack("{s:s, s:s, s:I}", "id", id, "path", path, "mtime_ms",
                                    (json_int_t)sb.st_mtim.tv_sec * 1000 +
                                        sb.st_mtim.tv_nsec / 1000000);
            if (!row || json_array_append_new(list, row) != 0)
                rc = WEIR_EXIT_FAIL;
        }
        free(path);
    }
    closedir(d);
    if (rc != WEIR_EXIT_OK) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return WEIR_EXIT_OK;
}

/*
 * The session of `dir` that `arg` names: its id exactly (*id stays NULL),
 * else the one id that starts with it (*id, malloc'd); none: *id NULL (the
 * open says the session is missing).  Several: a usage error that lists
 * them.
 */
static int resolve_prefix(const char *dir, const char *arg, char **id) {
    *id = NULL;
    char *exact = NULL;
    struct stat sb;
    if (asprintf(&exact, "%s/%s.jsonl", dir, arg) < 0) {
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    bool found = stat(exact, &sb) == 0;
    free(exact);
    if (found) /* an exact id always wins */
        return WEIR_EXIT_OK;
    json_t *list = NULL;
    if (weir_cli_session_list(dir, &list) != WEIR_EXIT_OK)
        return WEIR_EXIT_OK; /* an unreadable folder: the open says why */
    size_t n = strlen(arg), i, hits = 0;
    const json_t *row;
    char names[1024] = "";
    size_t len = 0;
    json_t *sorted = json_array(); /* the candidates in id order: a stable message */
    if (!sorted) {
        json_decref(list);
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    json_array_foreach(list, i, row) {
        const char *cand = json_string_value(json_object_get(row, "id"));
        if (!strncmp(cand, arg, n)) {
            size_t at = 0;
            while (at < json_array_size(sorted) &&
                   strcmp(json_string_value(json_array_get(sorted, at)), cand) < 0)
                at++;
            json_array_insert_new(sorted, at, json_string(cand));
        }
    }
    json_decref(list);
    list = sorted;
    json_array_foreach(list, i, row) {
        const char *cand = json_string_value(row);
        if (!cand)
            continue;
        if (!hits++)
            *id = strdup(cand);
        if (len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", cand);
    }
    json_decref(list);
    if (hits > 1) {
        fprintf(stderr, "weir: session id prefix '%s' is ambiguous: %zu sessions start with it: %s\n",
                arg, hits, names);
        free(*id);
        *id = NULL;
        return WEIR_EXIT_USAGE;
    }
    if (hits == 1 && !*id) {
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    return WEIR_EXIT_OK;
}

int weir_cli_session_newest(const json_t *config, char **id) {
    *id = NULL;
    if (!file_store(config)) {
        fprintf(stderr, "weir: --last takes the newest session of the session folder: the "
                        "file store only (give the id)\n");
        return WEIR_EXIT_USAGE;
    }
    char *dir = NULL;
    int rc = weir_cli_session_dir(config, &dir);
    if (rc != WEIR_EXIT_OK)
        return rc;
    json_t *list = NULL;
    if ((rc = weir_cli_session_list(dir, &list)) != WEIR_EXIT_OK) {
        fprintf(stderr, "weir: cannot read %s: %s\n", dir, strerror(errno));
        free(dir);
        return rc;
    }
    /* newest by its last event's time, as `weir sessions` orders them; a log
     * the summary refuses is passed over */
    long long best = LLONG_MIN;
    size_t i;
    const json_t *row;
    json_array_foreach(list, i, row) {
        json_t *sum = NULL;
        weir_error err;
        weir_error_clear(&err);
        if (weir_log_summary(json_string_value(json_object_get(row, "path")), &sum, &err) !=
            WEIR_OK)
            continue;
        const json_t *last = json_object_get(sum, "last_time");
        long long t = json_is_integer(last) ? (long long)json_integer_value(last)
                                            : (long long)json_integer_value(
                                                  json_object_get(row, "mtime_ms"));
        const char *cand = json_string_value(json_object_get(row, "id"));
        if (t > best || (t == best && *id && strcmp(cand, *id) < 0)) {
            char *dup = strdup(cand);
            if (dup) {
                free(*id);
                *id = dup;
                best = t;
            }
        }
        json_decref(sum);
    }
    json_decref(list);
    if (!*id) {
        fprintf(stderr, "weir: --last: no session in %s\n", dir);
        rc = WEIR_EXIT_IO;
    }
    free(dir);
    return rc;
}

int weir_cli_session_path(const json_t *config, const char *arg, weir_cli_target kind,
                          char **out) {
    size_t n = strlen(arg);
    *out = NULL;
    bool path = kind == WEIR_CLI_PATH ||
                (kind == WEIR_CLI_ID_OR_PATH &&
                 (strchr(arg, '/') || (n > 6 && strcmp(arg + n - 6, ".jsonl") == 0)));
    if (!path && !weir_session_id_valid(arg)) {
        fprintf(stderr,
                "weir: '%.200s' is not a session id ([A-Za-z0-9][A-Za-z0-9._-]{0,127})%s\n", arg,
                kind == WEIR_CLI_ID ? "; give a log file with --log PATH" : "");
        return WEIR_EXIT_USAGE;
    }
    if (!*arg) {
        fprintf(stderr, "weir: empty log path\n");
        return WEIR_EXIT_USAGE;
    }
    if (path) {
        *out = strdup(arg);
    } else {
        char *dir = NULL;
        int rc = weir_cli_session_dir(config, &dir);
        if (rc != WEIR_EXIT_OK)
            return rc;
        char *id = NULL; /* the session a prefix names, or NULL: `arg` itself */
        if (kind == WEIR_CLI_ID_OR_PATH && file_store(config) &&
            (rc = resolve_prefix(dir, arg, &id)) != WEIR_EXIT_OK) {
            free(dir);
            return rc;
        }
        const char *name = id ? id : arg;
        size_t len = strlen(dir) + strlen(name) + 8;
        *out = malloc(len);
        if (*out)
            snprintf(*out, len, "%s/%s.jsonl", dir, name);
        free(id);
        free(dir);
    }
    if (!*out) {
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    return WEIR_EXIT_OK;
}

int weir_cli_session_dir(const json_t *config, char **out) {
    *out = NULL;
    const char *dir = json_string_value(json_object_get(json_object_get(config, "session"), "dir"));
    if (!dir || !*dir) {
        fprintf(stderr, "weir: session.dir is not set in the deployment config\n");
        return WEIR_EXIT_CONFIG;
    }
    const char *home = "";
    if (dir[0] == '~' && (dir[1] == '/' || dir[1] == '\0')) {
        home = getenv("HOME");
        if (!home || !*home) {
            fprintf(stderr, "weir: session.dir '%s' needs $HOME, which is not set\n", dir);
            return WEIR_EXIT_CONFIG;
        }
        dir++;
    }
    size_t len = strlen(home) + strlen(dir) + 1;
    *out = malloc(len);
    if (!*out) {
        fprintf(stderr, "weir: out of memory\n");
        return WEIR_EXIT_FAIL;
    }
    snprintf(*out, len, "%s%s", home, dir);
    return WEIR_EXIT_OK;
}

/* ---- reading a protocol's lines ------------------------------------------ */

/* The next byte of r->fd; EOF at its end (or a read error);
 * WEIR_CLI_LINE_SIGNAL when r->sig_fd had a byte (kept in r->signal). */
static int lines_byte(weir_cli_lines *r) {
    while (r->pos == r->len) {
        struct pollfd p[2] = {{.fd = r->fd, .events = POLLIN}, {.fd = r->sig_fd, .events = POLLIN}};
        int n = poll(p, r->sig_fd >= 0 ? 2 : 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return EOF;
        char c;
        if (r->sig_fd >= 0 && (p[1].revents & POLLIN) && read(r->sig_fd, &c, 1) == 1) {
            r->signal = c;
            return WEIR_CLI_LINE_SIGNAL;
        }
        if (!p[0].revents)
            continue;
        ssize_t got = read(r->fd, r->in, sizeof r->in);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return EOF;
        r->pos = 0;
        r->len = (size_t)got;
    }
    return (unsigned char)r->in[r->pos++];
}

long weir_cli_lines_read(weir_cli_lines *r, size_t max, char **buf, size_t *cap, bool *too_long) {
    size_t len = 0;
    int c;
    *too_long = false;
    while ((c = lines_byte(r)) != EOF && c != WEIR_CLI_LINE_SIGNAL && c != '\n') {
        if (len >= max) {
            *too_long = true;
            continue;
        }
        if (len + 1 >= *cap) {
            size_t ncap = *cap ? *cap * 2 : 4096;
            char *nb = realloc(*buf, ncap);
            if (!nb) {
                *too_long = true;
                continue;
            }
            *buf = nb;
            *cap = ncap;
        }
        (*buf)[len++] = (char)c;
    }
    if (c == WEIR_CLI_LINE_SIGNAL)
        return WEIR_CLI_LINE_SIGNAL;
    if (c == EOF && len == 0 && !*too_long)
        return -1;
    return (long)len;
}
