/*
 * cli/common.c - the helpers every subcommand shares: JSON lines, escaped
 * messages and exit codes, the -c files, the host, and the log path of a
 * session argument.  It calls only the public API (and libc, jansson), never
 * another file of cli/: main.c and the subcommands call it (see cli/cli.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    if (target) {
        if ((rc = weir_cli_session_path(config, target, kind, path)) != WEIR_EXIT_OK) {
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
        size_t len = strlen(dir) + n + 8;
        *out = malloc(len);
        if (*out)
            snprintf(*out, len, "%s/%s.jsonl", dir, arg);
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
