/*
 * cli/main.c - `weir` entry point, subcommand dispatch, and the small
 * subcommands: config, plugins, hooks, version.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"

static const char usage_text[] =
    "usage: weir <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [-c FILE]... [-s ID] [--json] [-m MODEL] [--provider ID] [PROMPT]\n"
    "                                              run a turn (REPL without PROMPT on a tty)\n"
    "  resume [-c FILE]... [--json] ID|--last [PROMPT]\n"
    "                                              resume a session (closes an open turn)\n"
    "  sessions [-c FILE]... [--json]              list the sessions, newest first\n"
    "  sessions rm ID... | prune --older-than AGE  remove sessions\n"
    "  log [-c FILE]... ID|FILE [--json|--derive|--check]\n"
    "                                              print, derive or check a session log\n"
    "  compact [-c FILE]... [-i TEXT] [--json] ID  compact a session's context now\n"
    "  send [-c FILE]... -s ID [--mode M] TEXT     queue input for a session, not running it\n"
    "  worker [-c FILE]... [--concurrency N]       run the sessions of a shared store that have input\n"
    "  config [-c FILE]... [--show-secrets]        print the composed deployment config\n"
    "  plugins [DIR]...                            list the plugins found\n"
    "  new-plugin [--kind K] NAME [DIR]            start a plugin project from the template\n"
    "  events [--markdown]                         print the event catalog\n"
    "  hooks [-c FILE]... [--catalog|--markdown]   print each hook chain in order\n"
    "  serve --stdio [-c FILE]... [-s ID]          one agent over a stdin/stdout JSONL protocol\n"
    "  acp [-c FILE]...                            an Agent Client Protocol agent (editors)\n"
    "  version                                     print versions\n"
    "  help COMMAND                                as weir COMMAND --help\n"
    "\n"
    "Without -c, the built-in default deployment is used; `-c default` names it,\n"
    "so `-c default -c overlay.json` changes it.  `weir <command> --help`\n"
    "(or `weir help <command>`) describes each command.\n"
    "\n"
    "exit codes: 0 ok, 1 failure (turn error, failed check), 2 usage,\n"
    "            3 configuration or plugin load error, 4 I/O error (or the\n"
    "            session is held, or was taken over, by another writer),\n"
    "            130 / 143 stopped by SIGINT / SIGTERM (run, resume, serve),\n"
    "            129 by SIGHUP (run, resume)\n";

/*
 * `weir config` shows a deployment whose variables are not all set (a
 * fresh machine without OPENAI_API_KEY): each ${NAME} without a value or
 * default composes as the text "(unset: NAME)", set in this process's
 * environment only, and stderr says so; `weir run` would refuse it.
 * *unset receives the names, ", "-separated (malloc'd, NULL: none).  An
 * exit code.
 */
static int compose_showing_unset(weir_cli_files *o, json_t **out, char **unset) {
    *unset = NULL;
    size_t len = 0;
    for (int tries = 0; tries < 64; tries++) {
        weir_error err;
        weir_error_clear(&err);
        if (weir_config_compose((const char *const *)o->files, o->n, out, &err) == WEIR_OK)
            return WEIR_EXIT_OK;
        const char *v = strstr(err.text, "variable "), *end = v ? strstr(v, " is not set") : NULL;
        if (err.code != WEIR_E_CONFIG || !end || end[11] != '\0')
            return weir_cli_fail(NULL, &err);
        v += 9;
        char name[128], marker[160];
        snprintf(name, sizeof name, "%.*s", (int)(end - v), v);
        snprintf(marker, sizeof marker, "(unset: %s)", name);
        char *grown = realloc(*unset, len + strlen(name) + 3);
        if (!grown || setenv(name, marker, 1) != 0) {
            free(grown ? grown : *unset);
            *unset = NULL;
            return weir_cli_fail(NULL, &err);
        }
        *unset = grown;
        len += (size_t)sprintf(*unset + len, "%s%s", len ? ", " : "", name);
    }
    free(*unset);
    *unset = NULL;
    fprintf(stderr, "weir config: too many unset variables\n");
    return WEIR_EXIT_CONFIG;
}

/* The strings of `v` that are exactly an "(unset: NAME)" marker: the
 * object (borrowed) and key of each, as [object, key] pairs in `into`, to
 * be put back after the redaction (an unset value is no secret). */
static void find_unset(json_t *v, json_t *into) {
    const char *key;
    json_t *child;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, child) {
            const char *s = json_string_value(child);
            if (s && !strncmp(s, "(unset: ", 8) && s[strlen(s) - 1] == ')')
                json_array_append_new(into, json_pack("[O, s, s]", v, key, s));
            else
                find_unset(child, into);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child) find_unset(child, into);
    }
}

int weir_cmd_config(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"show-secrets", no_argument, NULL, 'S'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files o = {0};
    bool show_secrets = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&o, "weir", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'S':
            show_secrets = true;
            break;
        case 'h':
            printf("usage: weir config [-c FILE]... [--show-secrets]\n\n"
                   "Compose the deployment config files in order (base, then overlays),\n"
                   "expand ${VAR} and ${VAR:-default}, and print the result as JSON.\n"
                   "Without -c, prints the built-in default deployment; -c default names\n"
                   "it (-c default -c overlay.json).  agent and session start from the\n"
                   "documented defaults whatever the files give (docs/config.md).\n\n"
                   "Secrets print as \"***\": in every plugin row, api_key and the headers\n"
                   "Authorization, Proxy-Authorization, x-api-key and api-key, and whatever\n"
                   "the row's plugin marks \"secret\" in its config schema (the plugin is\n"
                   "opened to read it, never initialised; one that cannot be opened only\n"
                   "gets the built-in set).  In any string, a URL's userinfo prints as\n"
                   "***@ (http://***@host/v1).  Empty values stay empty.\n\n"
                   "A member a row leaves out prints with the default its plugin's config\n"
                   "schema gives it (provider-openai's \"api\": responses or chat).\n"
                   "A variable a file reads without a default (${OPENAI_API_KEY}) that is\n"
                   "not set prints as \"(unset: OPENAI_API_KEY)\", and stderr names it:\n"
                   "the config still prints (exit 0); weir run would refuse it.\n\n"
                   "  --show-secrets   print the secrets as they are, and no defaults\n"
                   "                   (opens no plugin)\n\n"
                   WEIR_CLI_HELP_ENV_DEPLOY);
            return WEIR_EXIT_OK;
        default:
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "weir config: unexpected argument '%s'\n", argv[optind]);
        return WEIR_EXIT_USAGE;
    }
    json_t *cfg = NULL;
    char *unset = NULL;
    int rc = compose_showing_unset(&o, &cfg, &unset);
    if (rc != WEIR_EXIT_OK)
        return rc;
    json_t *marks = json_array();
    if (unset && marks)
        find_unset(cfg, marks);
    weir_error err;
    weir_error_clear(&err);
    /* the plugins' defaults (provider-openai's api), from their schemas */
    if (marks && !show_secrets && weir_config_defaults(cfg, &err) != WEIR_OK) {
        json_decref(cfg);
        json_decref(marks);
        free(unset);
        return weir_cli_fail("config", &err);
    }
    if (!marks || (!show_secrets && weir_config_redact(cfg, &err) != WEIR_OK)) {
        json_decref(cfg); /* never print a config whose secrets may still show */
        json_decref(marks);
        free(unset);
        return marks ? weir_cli_fail("config", &err) : WEIR_EXIT_FAIL;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(marks, i, m) json_object_set(json_array_get(m, 0),
                                                     json_string_value(json_array_get(m, 1)),
                                                     json_array_get(m, 2));
    json_decref(marks);
    if (unset)
        fprintf(stderr,
                "weir config: not set: %s (shown as \"(unset: NAME)\"; weir run refuses "
                "this deployment until they are)\n",
                unset);
    free(unset);
    json_dumpf(cfg, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(cfg);
    return WEIR_EXIT_OK;
}

/* List the plugins of `dir`; -1 (errno set) when it cannot be opened. */
static int list_dir(const char *dir, int *found) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "weir-", 5) != 0 || len < 4 ||
            strcmp(e->d_name + len - 3, ".so") != 0)
            continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn)
            break;
        names = nn;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) { /* stable, readable order */
        for (size_t j = i + 1; j < n; j++) {
            if (names[i] && names[j] && strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        json_t *info = NULL;
        weir_error err;
        weir_error_clear(&err);
        if (weir_plugin_probe(path, &info, &err) == WEIR_OK) {
            printf("%-20s %-8s abi %-5s %s\n      %s\n",
                   json_string_value(json_object_get(info, "name")),
                   json_string_value(json_object_get(info, "version")),
                   json_string_value(json_object_get(info, "abi")),
                   json_string_value(json_object_get(info, "description")), path);
            json_decref(info);
            (*found)++;
        } else {
            printf("%-20s (not loadable: %s)\n", names[i], err.text);
        }
        free(names[i]);
    }
    free(names);
    return 0;
}

int weir_cmd_plugins(int argc, char **argv) {
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (ch == 'h') {
            printf("usage: weir plugins [DIR]...\n\n"
                   "List the plugins (weir-*.so) found in each DIR, or along $WEIR_PLUGIN_PATH\n"
                   "and the installed plugin directory, with name, version, ABI and\n"
                   "description.  Plugins are opened but not initialised.  A DIR that\n"
                   "cannot be read is an error (exit 4).\n\n" WEIR_CLI_HELP_ENV_BASE
                   "  WEIR_PLUGIN_PATH    more plugin folders, ':'-separated\n");
            return WEIR_EXIT_OK;
        }
        return WEIR_EXIT_USAGE;
    }
    int found = 0, rc = WEIR_EXIT_OK;
    if (optind < argc) {
        for (int i = optind; i < argc; i++) {
            if (list_dir(argv[i], &found) != 0) { /* a folder named by hand must be there */
                fprintf(stderr, "weir plugins: %s: %s\n", argv[i],
                        errno == ENOENT ? "no such directory" : strerror(errno));
                rc = WEIR_EXIT_IO;
            }
        }
    } else {
        json_t *dirs = NULL;
        weir_error err;
        weir_error_clear(&err);
        if (weir_plugin_dirs(&dirs, &err) != WEIR_OK)
            return weir_cli_fail("plugins", &err);
        size_t i;
        json_t *d;
        json_array_foreach(dirs, i, d) list_dir(json_string_value(d), &found);
        json_decref(dirs);
    }
    if (!found && rc == WEIR_EXIT_OK)
        fprintf(stderr, "weir plugins: no plugins found\n");
    return rc;
}

int weir_cmd_hooks(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"catalog", no_argument, NULL, 'C'},
                                              {"markdown", no_argument, NULL, 'm'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files o = {0};
    int ch, mode = 0;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&o, "weir", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'C':
            mode = 1;
            break;
        case 'm':
            mode = 2;
            break;
        case 'h':
            printf("usage: weir hooks [-c FILE]... [--catalog|--markdown]\n\n"
                   "Load the deployment and print every hook chain in the order it runs:\n"
                   "each listener's row id, plugin, version and roles, its placement and\n"
                   "before/after constraints.  --catalog prints the hook catalog (name,\n"
                   "mode, payload, result) without loading anything; --markdown prints it\n"
                   "as docs/hooks.md.\n\n" WEIR_CLI_HELP_ENV_DEPLOY);
            return WEIR_EXIT_OK;
        default:
            return WEIR_EXIT_USAGE;
        }
    }
    if (mode)
        return weir_hook_catalog_write(stdout, mode == 2) == WEIR_OK ? WEIR_EXIT_OK
                                                                     : WEIR_EXIT_IO;
    json_t *cfg = NULL;
    int rc = weir_cli_compose(o.files, o.n, &cfg);
    if (rc != WEIR_EXIT_OK)
        return rc;
    weir_host *host = NULL;
    if ((rc = weir_cli_host(cfg, false, &host)) != WEIR_EXIT_OK)
        return rc;
    weir_host_dump_hooks(host, stdout);
    weir_host_destroy(host);
    return WEIR_EXIT_OK;
}

int weir_cmd_version(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: weir version\n\n"
               "Print weir's version and the plugin ABI it loads (also weir --version).\n\n"
               WEIR_CLI_HELP_ENV_BASE);
        return WEIR_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "weir version: unexpected argument '%s'\n", argv[1]);
        return WEIR_EXIT_USAGE;
    }
    printf("weir %s (plugin ABI %d.%d)\n", WEIR_VERSION_STRING, WEIR_ABI_MAJOR,
           WEIR_ABI_MINOR);
    return WEIR_EXIT_OK;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"run", weir_cmd_run},         {"resume", weir_cmd_resume}, {"log", weir_cmd_log},
    {"config", weir_cmd_config},   {"plugins", weir_cmd_plugins}, {"hooks", weir_cmd_hooks},
    {"serve", weir_cmd_serve},     {"compact", weir_cmd_compact}, {"version", weir_cmd_version},
    {"sessions", weir_cmd_sessions}, {"send", weir_cmd_send}, {"worker", weir_cmd_worker},
    {"new-plugin", weir_cmd_new_plugin},
    {"events", weir_cmd_events},
    {"acp", weir_cmd_acp},
};

/*
 * A core dump of weir would hold its secrets (API keys in the config, in
 * request headers, in libcurl's buffers): the process is made non-dumpable
 * before anything is read, so a crash writes no core, and /proc/PID/mem,
 * maps and environ and ptrace attach are refused to other processes of the
 * same user.  WEIR_ALLOW_COREDUMP=1 keeps it dumpable, to debug a crash
 * (docs/cli.md).  Programs weir starts are dumpable again: exec resets it.
 */
static void no_core_dumps(void) {
#ifdef __linux__
    const char *allow = getenv("WEIR_ALLOW_COREDUMP");
    if (allow && !strcmp(allow, "1"))
        return;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        fprintf(stderr, "weir: warning: cannot make the process non-dumpable: %s\n",
                strerror(errno));
#endif
}

int main(int argc, char **argv) {
    no_core_dumps();
    if (argc < 2) {
        fputs(usage_text, stderr);
        return WEIR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        (!strcmp(argv[1], "help") && argc == 2)) {
        fputs(usage_text, stdout);
        return WEIR_EXIT_OK;
    }
    if (!strcmp(argv[1], "help")) { /* weir help CMD: weir CMD --help */
        if (argc > 3) {
            fprintf(stderr, "weir help: give one command (weir help CMD)\n");
            return WEIR_EXIT_USAGE;
        }
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (!strcmp(argv[2], commands[i].name)) {
                static char help_opt[] = "--help";
                char *help_argv[] = {argv[2], help_opt, NULL};
                optind = 1;
                return commands[i].fn(2, help_argv);
            }
        }
        fprintf(stderr, "weir help: unknown command '%s'\n\n%s", argv[2], usage_text);
        return WEIR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--version"))
        return weir_cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            optind = 1;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "weir: unknown command '%s'\n\n%s", argv[1], usage_text);
    return WEIR_EXIT_USAGE;
}
