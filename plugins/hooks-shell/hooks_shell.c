/*
 * plugins/hooks-shell/hooks_shell.c - Claude Code's command hooks (the
 * `hooks` section of a settings.json) run unchanged on weir's hooks
 * (docs/hooks-shell.md).
 *
 *   PreToolUse          tools/pre-execute    deny / ask / defer / allow, updatedInput
 *   PermissionRequest   tools/pre-execute    (after PreToolUse, unless it blocked)
 *                                            decision allow / deny, updatedInput, interrupt
 *   PostToolUse(Failure) tools/post-execute  block + reason, additionalContext,
 *                                            updatedToolOutput
 *   UserPromptSubmit    agent/pre-step       (human input only) block, context
 *   Stop                agent/turn-stopping  block + reason: the turn goes on
 *   PreCompact          agent/pre-compact    block
 *   SessionStart        agent/created        context
 *   SessionEnd          agent/disposed       side effects only
 *
 * Every matching handler of an event runs at once (hs_proc.c), each in a
 * process group of its own, with the event's JSON on stdin; the answers are
 * combined in Claude Code's precedence (deny > defer > ask > allow; exit 2
 * blocks; continue:false wins over every decision; every additionalContext
 * is delivered; for updatedInput the last to finish wins).  A hook past its
 * timeout is killed and counts as a non-blocking error.  A hook that gives
 * no answer at all (it could not be started, waited for, or read: EMFILE,
 * EAGAIN, ENOMEM, a program that cannot be executed...) is not a non-blocking
 * error: on PreToolUse and PermissionRequest it blocks the call unless the
 * row's `guard_failure` is "allow"; elsewhere it is a warning.
 *
 * Threads: the listeners run on the agent's driver thread (post-execute of
 * a background job on the settling thread); the groups are read-only after
 * init, the per-agent state is under one mutex.
 */
#define _GNU_SOURCE /* strdup, environ */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weir/plugin.h>

#include "hs_proc.h"

#define PLUGIN_NAME "hooks-shell"

extern char **environ;

/* Claude Code's defaults (docs/hooks-shell.md): 600 s; UserPromptSubmit
 * 30 s; SessionEnd 1.5 s for all of them unless a hook sets more (<= 60 s). */
#define DEFAULT_TIMEOUT_MS 600000LL
#define PROMPT_TIMEOUT_MS 30000LL
#define SESSION_END_MS 1500LL
#define SESSION_END_MAX_MS 60000LL
#define CONTEXT_MAX 10000   /* characters of one additionalContext / stdout kept */
#define STOP_BLOCK_CAP 8    /* consecutive Stop continuations of one turn */
#define LABEL_MAX 120

typedef enum ev {
    EV_PRE_TOOL,
    EV_POST_TOOL,
    EV_POST_TOOL_FAIL,
    EV_PROMPT,
    EV_STOP,
    EV_PRE_COMPACT,
    EV_SESSION_START,
    EV_SESSION_END,
    EV_PERM_REQUEST,
    EV_COUNT
} ev;

static const char *const EV_NAMES[EV_COUNT] = {
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit",
    "Stop",       "PreCompact",  "SessionStart",       "SessionEnd",
    "PermissionRequest"};

/* Claude Code events weir has no place for: skipped with a note. */
static const char *const EV_SKIPPED[] = {
    "PermissionDenied", "PostToolBatch", "Notification", "SubagentStart",
    "SubagentStop", "StopFailure", "PostCompact", "Setup", "UserPromptExpansion",
    "TeammateIdle", "TaskCreated", "TaskCompleted", "InstructionsLoaded", "ConfigChange",
    "CwdChanged", "DirectoryAdded", "FileChanged", "WorktreeCreate", "WorktreeRemove",
    "Elicitation", "ElicitationResult", "MessageDisplay", NULL};

typedef struct handler {
    char *command;       /* shell string (shell form) or the program (exec form) */
    char **args;         /* exec form: the arguments after the program; NULL: shell form */
    size_t nargs;
    long long timeout_ms; /* 0: the event's default */
    char label[LABEL_MAX + 1];
} handler;

typedef enum mkind { M_ALL, M_EXACT, M_REGEX } mkind;

typedef struct group {
    ev event;
    mkind kind;
    char **names; /* M_EXACT */
    size_t nnames;
    regex_t re;   /* M_REGEX */
    handler *h;
    size_t nh;
} group;

typedef struct agent_state {
    char *id;
    char *transcript;     /* the session log's path, or "" */
    json_int_t stop_turn; /* the turn the Stop continuations count for */
    int stop_count;
    char *halt;           /* continue:false seen: the next pre-step ends the turn with it */
    json_t *contexts;     /* call_id -> [PreToolUse additionalContext strings] */
} agent_state;

typedef struct state {
    weir_plugin *self;
    group *groups;
    size_t ngroups;
    char *cwd;             /* absolute: the hooks' cwd and CLAUDE_PROJECT_DIR */
    long long timeout_ms;  /* config `timeout`, or 0 */
    bool guard_allow;      /* config `guard_failure` "allow": a PreToolUse or
                              PermissionRequest hook that cannot run is skipped
                              (fail open); default "block" */
    bool has[EV_COUNT];
    pthread_mutex_t mu;    /* agents, nagents and every agent_state */
    agent_state **agents;
    size_t nagents;
} state;

static const char config_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"settings\":{\"type\":\"string\",\"minLength\":1},"
    "\"hooks\":{\"type\":\"object\"},"
    "\"cwd\":{\"type\":\"string\",\"minLength\":1},"
    "\"timeout\":{\"type\":\"number\",\"minimum\":0.001},"
    "\"guard_failure\":{\"type\":\"string\",\"enum\":[\"block\",\"allow\"]}}}";

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static int set_err(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int set_err(weir_error *err, int code, const char *fmt, ...) {
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    err->code = (weir_status)code;
    snprintf(err->plugin, sizeof err->plugin, "%s", PLUGIN_NAME);
    err->hook[0] = '\0';
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return code;
}

/* `v` as compact JSON text, malloc'd, or NULL (out of memory).  Measured,
 * then written into a buffer that fits, not json_dumps: jansson 2.14 goes on
 * past an object key its growing buffer failed to take and reports success,
 * and a hook reading text that is not JSON fails open. */
static char *json_text(const json_t *v) {
    size_t n = v ? json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
    char *text = n ? malloc(n + 1) : NULL;
    if (text && json_dumpb(v, text, n, JSON_COMPACT | JSON_ENCODE_ANY) != n) {
        free(text);
        return NULL;
    }
    if (text)
        text[n] = '\0';
    return text;
}

/* "a" + "\n" + "b" (either may be NULL or empty); malloc'd. */
static char *join2(char *a, const char *b) {
    if (!b || !*b)
        return a;
    size_t la = a ? strlen(a) : 0, lb = strlen(b);
    char *r = realloc(a, la + (la ? 1 : 0) + lb + 1);
    if (!r)
        return a;
    if (la)
        r[la++] = '\n';
    memcpy(r + la, b, lb + 1);
    return r;
}

/* Trailing whitespace off, cut to CONTEXT_MAX bytes (at a character). */
static char *clean_text(const char *s) {
    if (!s)
        return NULL;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n > CONTEXT_MAX) {
        n = CONTEXT_MAX;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\0';
    }
    return r;
}

static void first_line(const char *s, char *buf, size_t size) {
    size_t n = 0;
    while (s && s[n] && s[n] != '\n' && n + 1 < size)
        n++;
    if (size) {
        memcpy(buf, s ? s : "", n);
        buf[n] = '\0';
    }
}

/* The text blocks of a message's content, joined with newlines (malloc'd). */
static char *message_text(const json_t *message) {
    const json_t *content = json_object_get(message, "content");
    if (json_is_string(content))
        return strdup(json_string_value(content));
    char *out = strdup("");
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t && out && *out)
            out = join2(out, t);
        else if (t && out) {
            free(out);
            out = strdup(t);
        }
    }
    return out;
}

/* ------------------------------------------------------------------------ */
/* Config: the settings file and the `hooks` shape                           */
/* ------------------------------------------------------------------------ */

static void handler_free(handler *h) {
    free(h->command);
    for (size_t i = 0; i < h->nargs; i++)
        free(h->args[i]);
    free(h->args);
}

static void group_free(group *g) {
    for (size_t i = 0; i < g->nnames; i++)
        free(g->names[i]);
    free(g->names);
    if (g->kind == M_REGEX)
        regfree(&g->re);
    for (size_t i = 0; i < g->nh; i++)
        handler_free(&g->h[i]);
    free(g->h);
}

static void agent_free(agent_state *a) {
    if (!a)
        return;
    free(a->id);
    free(a->transcript);
    free(a->halt);
    json_decref(a->contexts);
    free(a);
}

static void state_free(state *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->ngroups; i++)
        group_free(&s->groups[i]);
    free(s->groups);
    for (size_t i = 0; i < s->nagents; i++)
        agent_free(s->agents[i]);
    free(s->agents);
    free(s->cwd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static bool exact_matcher(const char *m) {
    for (const char *p = m; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_- ,|", *p))
            return false;
    return true;
}

/* A JavaScript RegExp as POSIX ERE: \d \w \s and their negations. */
static char *js_to_ere(const char *m) {
    size_t cap = strlen(m) * 14 + 1, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *p = m; *p; p++) {
        const char *rep = NULL;
        if (p[0] == '\\' && p[1]) {
            switch (p[1]) {
            case 'd': rep = "[0-9]"; break;
            case 'D': rep = "[^0-9]"; break;
            case 'w': rep = "[A-Za-z0-9_]"; break;
            case 'W': rep = "[^A-Za-z0-9_]"; break;
            case 's': rep = "[[:space:]]"; break;
            case 'S': rep = "[^[:space:]]"; break;
            default: break;
            }
        }
        if (rep) {
            size_t l = strlen(rep);
            memcpy(out + n, rep, l);
            n += l;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return out;
}

static int parse_matcher(group *g, const char *m, const char *where, weir_error *err) {
    if (!m || !*m || strcmp(m, "*") == 0) {
        g->kind = M_ALL;
        return WEIR_OK;
    }
    if (exact_matcher(m)) {
        g->kind = M_EXACT;
        char *copy = strdup(m);
        if (!copy)
            return set_err(err, WEIR_E_NOMEM, "out of memory");
        for (char *tok = strtok(copy, "|,"); tok; tok = strtok(NULL, "|,")) {
            while (*tok == ' ')
                tok++;
            size_t l = strlen(tok);
            while (l && tok[l - 1] == ' ')
                tok[--l] = '\0';
            if (!l)
                continue;
            char **v = realloc(g->names, (g->nnames + 1) * sizeof *v);
            if (!v || !(v[g->nnames] = strdup(tok))) {
                if (v)
                    g->names = v;
                free(copy);
                return set_err(err, WEIR_E_NOMEM, "out of memory");
            }
            g->names = v;
            g->nnames++;
        }
        free(copy);
        return WEIR_OK;
    }
    char *ere = js_to_ere(m);
    if (!ere)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    int rc = regcomp(&g->re, ere, REG_EXTENDED | REG_NOSUB);
    free(ere);
    if (rc != 0) {
        char msg[200];
        regerror(rc, &g->re, msg, sizeof msg);
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.matcher \"%s\": not a regular expression: %s",
                       where, m, msg);
    }
    g->kind = M_REGEX;
    return WEIR_OK;
}

static bool group_matches(const group *g, const char *value) {
    if (g->kind == M_ALL)
        return true;
    if (!value)
        return false;
    if (g->kind == M_EXACT) {
        for (size_t i = 0; i < g->nnames; i++)
            if (strcmp(g->names[i], value) == 0)
                return true;
        return false;
    }
    return regexec(&g->re, value, 0, NULL, 0) == 0;
}

static int parse_handler(state *s, group *g, const json_t *hj, const char *where,
                         weir_error *err) {
    if (!json_is_object(hj))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: expected an object", where);
    const char *type = json_string_value(json_object_get(hj, "type"));
    if (!type)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.type: expected a string", where);
    if (strcmp(type, "command") != 0) {
        weir_log(s->self, WEIR_LOG_WARN, "%s: hooks of type \"%s\" are not run (only \"command\")",
                 where, type);
        return WEIR_OK;
    }
    const char *cmd = json_string_value(json_object_get(hj, "command"));
    if (!cmd || !*cmd)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.command: expected a non-empty string",
                       where);
    const json_t *to = json_object_get(hj, "timeout");
    if (to && (!json_is_number(to) || json_number_value(to) <= 0))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.timeout: expected seconds > 0", where);
    const json_t *args = json_object_get(hj, "args");
    if (args && !json_is_array(args))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.args: expected an array of strings", where);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)hj, key, v) {
        static const char *const known[] = {"type", "command", "args", "timeout", "if",
                                            "statusMessage", "async", "asyncRewake", "shell",
                                            "once", NULL};
        bool k = false;
        for (size_t i = 0; known[i]; i++)
            k = k || strcmp(known[i], key) == 0;
        if (!k)
            weir_log(s->self, WEIR_LOG_INFO, "%s: key \"%s\" is not known; ignored", where, key);
    }
    if (json_is_true(json_object_get(hj, "async")))
        weir_log(s->self, WEIR_LOG_WARN,
                 "%s: async hooks run like the others here (weir waits for them)", where);
    if (json_object_get(hj, "if") &&
        (g->event != EV_PRE_TOOL && g->event != EV_POST_TOOL && g->event != EV_POST_TOOL_FAIL)) {
        weir_log(s->self, WEIR_LOG_INFO, "%s: \"if\" on %s: the hook never runs (as in Claude Code)",
                 where, EV_NAMES[g->event]);
        return WEIR_OK;
    }
    handler *hv = realloc(g->h, (g->nh + 1) * sizeof *hv);
    if (!hv)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    g->h = hv;
    handler *h = &g->h[g->nh];
    memset(h, 0, sizeof *h);
    h->command = strdup(cmd);
    if (!h->command)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    g->nh++;
    if (to)
        h->timeout_ms = (long long)(json_number_value(to) * 1000.0);
    snprintf(h->label, sizeof h->label, "%s", cmd);
    if (args) {
        h->args = calloc(json_array_size(args) + 1, sizeof *h->args);
        if (!h->args)
            return set_err(err, WEIR_E_NOMEM, "out of memory");
        size_t i;
        json_array_foreach(args, i, v) {
            if (!json_is_string(v))
                return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.args[%zu]: expected a string", where,
                               i);
            if (!(h->args[h->nargs] = strdup(json_string_value(v))))
                return set_err(err, WEIR_E_NOMEM, "out of memory");
            h->nargs++;
        }
    }
    return WEIR_OK;
}

static int event_index(const char *name) {
    for (int i = 0; i < EV_COUNT; i++)
        if (strcmp(EV_NAMES[i], name) == 0)
            return i;
    return -1;
}

/* One `hooks` object ({"<Event>":[{matcher?, hooks:[...]}]}); `from` names it. */
static int parse_hooks(state *s, const json_t *hooks, const char *from, weir_error *err) {
    if (!json_is_object(hooks))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: \"hooks\" must be an object", from);
    const char *name;
    const json_t *groups;
    json_object_foreach((json_t *)(uintptr_t)hooks, name, groups) {
        int e = event_index(name);
        if (e < 0) {
            bool skipped = false;
            for (size_t i = 0; EV_SKIPPED[i]; i++)
                skipped = skipped || strcmp(EV_SKIPPED[i], name) == 0;
            weir_log(s->self, WEIR_LOG_WARN, "%s: hooks.%s: %s; its hooks are not run", from, name,
                     skipped ? "weir has no such event" : "unknown event");
            continue;
        }
        if (!json_is_array(groups))
            return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: hooks.%s: expected an array", from,
                           name);
        size_t i;
        const json_t *gj;
        json_array_foreach(groups, i, gj) {
            char where[256];
            snprintf(where, sizeof where, "%s: hooks.%s[%zu]", from, name, i);
            const json_t *list = json_object_get(gj, "hooks");
            const json_t *m = json_object_get(gj, "matcher");
            if (!json_is_object(gj) || !json_is_array(list))
                return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: expected {matcher?, hooks:[...]}",
                               where);
            if (m && !json_is_string(m))
                return set_err(err, WEIR_E_PLUGIN_CONFIG, "%s.matcher: expected a string", where);
            group *gv = realloc(s->groups, (s->ngroups + 1) * sizeof *gv);
            if (!gv)
                return set_err(err, WEIR_E_NOMEM, "out of memory");
            s->groups = gv;
            group *g = &s->groups[s->ngroups++];
            memset(g, 0, sizeof *g);
            g->event = (ev)e;
            /* UserPromptSubmit and Stop have no matcher: always fire */
            const char *mv = (e == EV_PROMPT || e == EV_STOP) ? NULL : json_string_value(m);
            int rc = parse_matcher(g, mv, where, err);
            if (rc != WEIR_OK)
                return rc;
            size_t j;
            const json_t *hj;
            json_array_foreach(list, j, hj) {
                char hw[300];
                snprintf(hw, sizeof hw, "%s.hooks[%zu]", where, j);
                rc = parse_handler(s, g, hj, hw, err);
                if (rc != WEIR_OK)
                    return rc;
            }
            if (g->nh)
                s->has[e] = true;
        }
    }
    return WEIR_OK;
}

/* `path` made absolute against `base`; malloc'd. */
static char *absolute(const char *base, const char *path) {
    if (path[0] == '/')
        return strdup(path);
    size_t n = strlen(base) + strlen(path) + 2;
    char *r = malloc(n);
    if (r)
        snprintf(r, n, "%s/%s", base, path);
    return r;
}

static int load_config(state *s, const json_t *config, weir_error *err) {
    char here[PATH_MAX];
    if (!getcwd(here, sizeof here))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "cannot read the current directory: %s",
                       strerror(errno));
    const char *cwd = json_string_value(json_object_get(config, "cwd"));
    s->cwd = cwd ? absolute(here, cwd) : strdup(here);
    if (!s->cwd)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    struct stat st;
    if (stat(s->cwd, &st) != 0 || !S_ISDIR(st.st_mode))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "cwd \"%s\": not a directory", s->cwd);
    const json_t *to = json_object_get(config, "timeout");
    if (to)
        s->timeout_ms = (long long)(json_number_value(to) * 1000.0);
    const json_t *gf = json_object_get(config, "guard_failure");
    if (gf) { /* the schema checked it too; a caller may skip the schema */
        const char *v = json_string_value(gf);
        if (!v || (strcmp(v, "block") != 0 && strcmp(v, "allow") != 0))
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "config.guard_failure: expected \"block\" or \"allow\"");
        s->guard_allow = strcmp(v, "allow") == 0;
    }
    const char *settings = json_string_value(json_object_get(config, "settings"));
    const json_t *inline_hooks = json_object_get(config, "hooks");
    if (!settings && !inline_hooks)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "config: give \"settings\" (a settings.json path) or \"hooks\"");
    if (settings) {
        char *path = absolute(s->cwd, settings);
        if (!path)
            return set_err(err, WEIR_E_NOMEM, "out of memory");
        json_error_t jerr;
        json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc) {
            int rc = set_err(err, WEIR_E_PLUGIN_CONFIG, "settings \"%s\": %s (line %d)", path,
                             jerr.text, jerr.line);
            free(path);
            return rc;
        }
        int rc = WEIR_OK;
        const json_t *hooks = json_object_get(doc, "hooks");
        if (!json_is_object(doc))
            rc = set_err(err, WEIR_E_PLUGIN_CONFIG, "settings \"%s\": expected an object", path);
        else if (json_is_true(json_object_get(doc, "disableAllHooks")))
            weir_log(s->self, WEIR_LOG_INFO, "settings %s: disableAllHooks is set", path);
        else if (!hooks)
            weir_log(s->self, WEIR_LOG_WARN, "settings %s: no \"hooks\" key", path);
        else
            rc = parse_hooks(s, hooks, path, err);
        json_decref(doc);
        free(path);
        if (rc != WEIR_OK)
            return rc;
    }
    return inline_hooks ? parse_hooks(s, inline_hooks, "config", err) : WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Per-agent state                                                           */
/* ------------------------------------------------------------------------ */

/* The agent's state (created on first use); call with s->mu held. */
static agent_state *agent_get(state *s, const char *id) {
    for (size_t i = 0; i < s->nagents; i++)
        if (strcmp(s->agents[i]->id, id) == 0)
            return s->agents[i];
    agent_state *a = calloc(1, sizeof *a);
    agent_state **v = a ? realloc(s->agents, (s->nagents + 1) * sizeof *v) : NULL;
    if (!a || !v || !(a->id = strdup(id)) || !(a->contexts = json_object())) {
        agent_free(a);
        if (v)
            s->agents = v;
        return NULL;
    }
    a->stop_turn = -1;
    s->agents = v;
    s->agents[s->nagents++] = a;
    return a;
}

/* The session log's path for an agent, remembered (malloc'd copy). */
static char *transcript_of(state *s, weir_agent *agent) {
    const char *id = agent ? weir_agent_id(agent) : NULL;
    if (!id)
        return strdup("");
    pthread_mutex_lock(&s->mu);
    agent_state *a = agent_get(s, id);
    if (a && !a->transcript) {
        const char *p = WEIR_API_HAS(WEIR_PLUGIN_API, agent_log_path) ? weir_agent_log_path(agent)
                                                                      : NULL;
        a->transcript = strdup(p ? p : "");
    }
    char *r = strdup(a && a->transcript ? a->transcript : "");
    pthread_mutex_unlock(&s->mu);
    return r;
}

static void set_halt(state *s, const char *id, const char *reason) {
    pthread_mutex_lock(&s->mu);
    agent_state *a = agent_get(s, id);
    if (a && !a->halt)
        a->halt = strdup(reason && *reason ? reason : "a hook stopped the agent (continue:false)");
    pthread_mutex_unlock(&s->mu);
}

static char *take_halt(state *s, const char *id) {
    pthread_mutex_lock(&s->mu);
    agent_state *a = agent_get(s, id);
    char *r = a ? a->halt : NULL;
    if (a)
        a->halt = NULL;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Running an event                                                          */
/* ------------------------------------------------------------------------ */

/* One handler's answer, read as Claude Code reads it. */
typedef struct answer {
    const handler *h;
    hs_proc p;
    json_t *json; /* the stdout object, or NULL (plain text) */
} answer;

/* What the answers of one event come to. */
typedef struct outcome {
    bool block;           /* exit 2, decision:"block", or a deny */
    char *reason;         /* why (stderr of an exit 2, or the JSON's reason) */
    bool halt;            /* continue:false */
    char *stop_reason;
    json_t *contexts;     /* [strings]: additionalContext and (where it counts) plain stdout */
    int perm;             /* PreToolUse: 0 none, 1 allow, 2 ask, 3 defer, 4 deny;
                             PermissionRequest: 0 none, 1 allow, 4 deny */
    bool interrupt;       /* PermissionRequest: a deny with interrupt:true */
    char *perm_reason;
    json_t *updated_input;
    json_t *updated_output;
    size_t ran;           /* handlers that ran */
    size_t failed;        /* handlers that gave no answer: not started, not waited
                             for, output not read, or not run at all (out of memory) */
    char *failure;        /* the first of them, said in one line (may be NULL on OOM) */
} outcome;

static void outcome_clear(outcome *o) {
    free(o->failure);
    free(o->reason);
    free(o->stop_reason);
    free(o->perm_reason);
    json_decref(o->contexts);
    json_decref(o->updated_input);
    json_decref(o->updated_output);
    memset(o, 0, sizeof *o);
}

static bool call_cancelled(void *ud) {
    weir_signal *sig = ud;
    return sig && weir_signal_cancelled(sig);
}

/* environ with our variables set (the strings are malloc'd; free_env). */
static char **make_env(const state *s, const char *session_id) {
    static const char *const ours[] = {"CLAUDE_PROJECT_DIR=", "WEIR_SESSION_ID=",
                                       "CLAUDE_CODE_SESSION_ID=", NULL};
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool mine = false;
        for (size_t j = 0; ours[j]; j++)
            mine = mine || strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
        if (!mine)
            env[k++] = strdup(environ[i]);
    }
    const char *vals[] = {s->cwd, session_id, session_id};
    for (size_t j = 0; ours[j]; j++) {
        size_t l = strlen(ours[j]) + strlen(vals[j]) + 1;
        if ((env[k] = malloc(l)))
            snprintf(env[k], l, "%s%s", ours[j], vals[j]);
        k++;
    }
    for (size_t i = 0; i < k; i++)
        if (!env[i]) {
            for (size_t j = 0; j < k; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    return env;
}

static void free_strv(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* ${CLAUDE_PROJECT_DIR} replaced in an exec-form string (malloc'd). */
static char *expand(const state *s, const char *in) {
    static const char key[] = "${CLAUDE_PROJECT_DIR}";
    char *out = strdup("");
    const char *p = in;
    while (out) {
        const char *q = strstr(p, key);
        size_t lit = q ? (size_t)(q - p) : strlen(p);
        size_t lo = strlen(out), add = lit + (q ? strlen(s->cwd) : 0);
        char *r = realloc(out, lo + add + 1);
        if (!r) {
            free(out);
            return NULL;
        }
        out = r;
        memcpy(out + lo, p, lit);
        if (q)
            memcpy(out + lo + lit, s->cwd, strlen(s->cwd));
        out[lo + add] = '\0';
        if (!q)
            break;
        p = q + strlen(key);
    }
    return out;
}

/* The program for an exec-form command: as given with a '/', else on PATH. */
static char *find_program(const char *cmd) {
    if (strchr(cmd, '/'))
        return strdup(cmd);
    const char *path = getenv("PATH");
    char *dirs = strdup(path && *path ? path : "/usr/bin:/bin");
    char *found = NULL;
    for (char *save = NULL, *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d && !found;
         d = strtok_r(NULL, ":", &save)) {
        size_t n = strlen(d) + strlen(cmd) + 2;
        char *c = malloc(n);
        if (c) {
            snprintf(c, n, "%s/%s", *d ? d : ".", cmd);
            if (access(c, X_OK) == 0)
                found = c;
            else
                free(c);
        }
    }
    free(dirs);
    return found ? found : strdup(cmd);
}

/* argv of one handler (malloc'd strings; *path the program). */
static char **handler_argv(const state *s, const handler *h, char **path) {
    char **argv = calloc(h->args ? h->nargs + 2 : 4, sizeof *argv);
    if (!argv)
        return NULL;
    if (!h->args) {
        *path = strdup("/bin/sh");
        argv[0] = strdup("sh");
        argv[1] = strdup("-c");
        argv[2] = strdup(h->command);
        if (!*path || !argv[0] || !argv[1] || !argv[2]) {
            free_strv(argv);
            free(*path);
            return NULL;
        }
        return argv;
    }
    char *prog = expand(s, h->command);
    *path = prog ? find_program(prog) : NULL;
    argv[0] = prog;
    bool ok = prog && *path;
    for (size_t i = 0; ok && i < h->nargs; i++)
        ok = (argv[i + 1] = expand(s, h->args[i])) != NULL;
    if (!ok) {
        free_strv(argv);
        free(*path);
        return NULL;
    }
    return argv;
}

/* Order by the time each took, so that "the last to finish wins". */
static int by_finish(const void *a, const void *b) {
    long long x = ((const answer *)a)->p.elapsed_ms, y = ((const answer *)b)->p.elapsed_ms;
    return x < y ? -1 : x > y;
}

static void add_context(outcome *o, const char *text) {
    char *t = clean_text(text);
    if (t && *t) {
        if (!o->contexts)
            o->contexts = json_array();
        json_array_append_new(o->contexts, json_string(t));
    }
    free(t);
}

static void set_str(char **dst, const char *v) {
    if (!v)
        return;
    char *c = clean_text(v);
    if (c) {
        free(*dst);
        *dst = c;
    }
}

static int perm_rank(const char *d) {
    if (!d)
        return 0;
    if (!strcmp(d, "allow") || !strcmp(d, "approve"))
        return 1;
    if (!strcmp(d, "ask"))
        return 2;
    if (!strcmp(d, "defer"))
        return 3;
    if (!strcmp(d, "deny") || !strcmp(d, "block"))
        return 4;
    return -1;
}

/* One handler gave no answer: count it, and keep the first one's line. */
static void add_failure(outcome *o, const char *fmt, ...) WEIR_PRINTF(2, 3);
static void add_failure(outcome *o, const char *fmt, ...) {
    if (o->failed++ || o->failure)
        return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->failure = strdup(line); /* NULL on OOM: the count still blocks */
}

/* PermissionRequest's hookSpecificOutput.decision: {behavior: "allow"|"deny",
 * message? (deny), updatedInput? (allow), interrupt? (deny)}; any deny wins. */
static void read_permission(state *s, const answer *a, const json_t *hso, outcome *o) {
    const json_t *d = json_object_get(hso, "decision");
    if (!d)
        return;
    const char *behavior = json_string_value(json_object_get(d, "behavior"));
    int rank = !json_is_object(d) || !behavior      ? -1
               : strcmp(behavior, "allow") == 0 ? 1
               : strcmp(behavior, "deny") == 0  ? 4
                                                 : -1;
    if (rank < 0) {
        weir_log(s->self, WEIR_LOG_WARN, "PermissionRequest hook `%s` error: decision.behavior "
                 "is not \"allow\" or \"deny\"; ignored", a->h->label);
        return;
    }
    const char *msg = json_string_value(json_object_get(d, "message"));
    if (rank > o->perm) {
        o->perm = rank;
        free(o->perm_reason);
        o->perm_reason = msg ? clean_text(msg) : NULL;
    }
    if (rank == 4) {
        if (a->p.status == 2 && msg)
            set_str(&o->reason, msg); /* exit 2 with a deny: the JSON's message */
        if (json_is_true(json_object_get(d, "interrupt")))
            o->interrupt = true;
        return;
    }
    const json_t *ui = json_object_get(d, "updatedInput");
    if (json_is_object(ui)) {
        json_decref(o->updated_input);
        o->updated_input = json_deep_copy(ui); /* the last to finish wins */
    }
}

/* Read one answer into the outcome (docs/hooks-shell.md, "Answers"). */
static void read_answer(state *s, ev e, answer *a, outcome *o) {
    const hs_proc *p = &a->p;
    const char *name = EV_NAMES[e];
    if (!p->started) {
        if (p->start_step && strcmp(p->start_step, "execve") == 0)
            add_failure(o, "%s hook `%s` could not start: cannot execute %s: %s", name,
                        a->h->label, p->path, strerror(p->errno_start));
        else
            add_failure(o, "%s hook `%s` could not start: %s%s%s", name, a->h->label,
                        p->start_step ? p->start_step : "", p->start_step ? ": " : "",
                        strerror(p->errno_start));
        return;
    }
    if (p->timed_out) {
        weir_log(s->self, WEIR_LOG_WARN,
                 "%s hook `%s` timed out after %lld ms: killed (its process group); going on "
                 "without it",
                 name, a->h->label, p->elapsed_ms);
        return;
    }
    if (p->cancelled)
        return;
    /* ran, but what it answered is not known for sure: the answer read
     * below may still count (a deny), the failure counts in any case */
    if (p->errno_wait)
        add_failure(o, "%s hook `%s` could not be waited for (waitpid: %s): its exit code is "
                    "unknown", name, a->h->label, strerror(p->errno_wait));
    if (p->errno_read)
        add_failure(o, "%s hook `%s`: its output could not be read: %s", name, a->h->label,
                    strerror(p->errno_read));
    o->ran++;
    const char *out = p->out ? p->out : "";
    const char *lead = out;
    while (isspace((unsigned char)*lead))
        lead++;
    if (*lead == '{') {
        json_t *j = json_loads(lead, 0, NULL);
        if (json_is_object(j))
            a->json = j;
        else
            json_decref(j);
    }
    const json_t *j = a->json;
    const char *err_text = p->err ? p->err : "";
    if (p->status == 2) {
        o->block = true;
        if (!o->reason || !*o->reason)
            set_str(&o->reason, *err_text ? err_text : "blocked by a hook (exit code 2)");
    } else if (p->status != 0 && !j && !p->errno_wait) {
        char line[300];
        first_line(err_text, line, sizeof line);
        if (p->signal) /* Claude Code: a non-blocking error, as any code but 2 */
            weir_log(s->self, WEIR_LOG_WARN,
                     "%s hook `%s` error: killed by signal %d (%s)%s%s", name, a->h->label,
                     p->signal, strsignal(p->signal), *line ? ": " : "", line);
        else
            weir_log(s->self, WEIR_LOG_WARN,
                     "%s hook `%s` error: Failed with non-blocking status code: %d%s%s", name,
                     a->h->label, p->status, *line ? ": " : "", line);
    }
    if (!j) {
        /* plain stdout on success is context for these two (Claude Code) */
        if (p->status == 0 && (e == EV_PROMPT || e == EV_SESSION_START))
            add_context(o, out);
        return;
    }
    const json_t *cont = json_object_get(j, "continue");
    if (json_is_false(cont)) {
        o->halt = true;
        set_str(&o->stop_reason, json_string_value(json_object_get(j, "stopReason")));
    }
    const char *sys = json_string_value(json_object_get(j, "systemMessage"));
    if (sys)
        weir_log(s->self, WEIR_LOG_WARN, "%s hook `%s`: %s", name, a->h->label, sys);
    const char *decision = json_string_value(json_object_get(j, "decision"));
    const char *reason = json_string_value(json_object_get(j, "reason"));
    const json_t *hso = json_object_get(j, "hookSpecificOutput");
    const char *hname = json_string_value(json_object_get(hso, "hookEventName"));
    if (hso && (!json_is_object(hso) || (hname && strcmp(hname, name) != 0))) {
        weir_log(s->self, WEIR_LOG_WARN,
                 "%s hook `%s` error: hookSpecificOutput is for %s; ignored", name, a->h->label,
                 hname ? hname : "another event");
        hso = NULL;
    }
    if (e == EV_PRE_TOOL) {
        const char *pd = json_string_value(json_object_get(hso, "permissionDecision"));
        const char *pr = json_string_value(json_object_get(hso, "permissionDecisionReason"));
        if (!pd && decision) { /* the deprecated top-level form */
            pd = decision;
            pr = reason;
        }
        int rank = perm_rank(pd);
        if (rank < 0)
            weir_log(s->self, WEIR_LOG_WARN, "%s hook `%s` error: permissionDecision \"%s\" is "
                     "not allow, deny, ask or defer; ignored", name, a->h->label, pd);
        if (rank > o->perm) {
            o->perm = rank;
            free(o->perm_reason);
            o->perm_reason = pr ? clean_text(pr) : NULL;
        }
        if (rank == 4 && p->status == 2 && pr)
            set_str(&o->reason, pr); /* exit 2 with a deny: the JSON's reason */
        const json_t *ui = json_object_get(hso, "updatedInput");
        if (json_is_object(ui) && rank != 3) {
            json_decref(o->updated_input);
            o->updated_input = json_deep_copy(ui); /* the last to finish wins */
        }
    } else if (e == EV_PERM_REQUEST) {
        read_permission(s, a, hso, o);
    } else if (decision && strcmp(decision, "block") == 0 && e != EV_SESSION_START &&
               e != EV_SESSION_END) {
        o->block = true;
        if (reason)
            set_str(&o->reason, reason);
        else if (!o->reason)
            o->reason = strdup(e == EV_STOP ? "a Stop hook asked to keep going"
                                            : "blocked by a hook");
    }
    if (e == EV_POST_TOOL || e == EV_POST_TOOL_FAIL) {
        const json_t *uo = json_object_get(hso, "updatedToolOutput");
        if (!uo)
            uo = json_object_get(hso, "updatedMCPToolOutput");
        if (uo) {
            json_decref(o->updated_output);
            o->updated_output = json_deep_copy(uo);
        }
    }
    const char *ctx = json_string_value(json_object_get(hso, "additionalContext"));
    if (ctx)
        add_context(o, ctx);
}

/* Whether a group of event `e` matches `match`. */
static bool any_matches(const state *s, ev e, const char *match) {
    for (size_t i = 0; i < s->ngroups; i++)
        if (s->groups[i].event == e && s->groups[i].nh && group_matches(&s->groups[i], match))
            return true;
    return false;
}

/* Whether a hook of `e` that gives no answer blocks what it guards. */
static bool fails_closed(const state *s, ev e) {
    return (e == EV_PRE_TOOL || e == EV_PERM_REQUEST) && !s->guard_allow;
}

/* The hooks of `e` gave no answer (o->failed of them): one line for all. */
static void report_failures(state *s, ev e, const outcome *o) {
    char more[80] = "";
    if (o->failed > 1)
        snprintf(more, sizeof more, " (and %zu more hook%s of this event)", o->failed - 1,
                 o->failed > 2 ? "s" : "");
    weir_log(s->self, WEIR_LOG_WARN, "%s%s; %s", o->failure ? o->failure : "a hook did not run",
             more,
             fails_closed(s, e) ? "the call is blocked (guard_failure \"block\")"
                                : "going on without it");
}

/*
 * Run every handler of event `e` whose group matches `match` (NULL: no
 * matcher), with `fields` (borrowed) added to the common input, and read
 * their answers into `o`.  Returns false when none matched.  Handlers that
 * gave no answer (not started, out of memory...) are counted in o->failed
 * and reported here; what that means for the event is the caller's.
 */
static bool run_event(state *s, weir_call *call, weir_agent *agent, ev e, const char *match,
                      const json_t *fields, outcome *o) {
    memset(o, 0, sizeof *o);
    size_t n = 0;
    for (size_t i = 0; i < s->ngroups; i++)
        if (s->groups[i].event == e && group_matches(&s->groups[i], match))
            n += s->groups[i].nh;
    if (!n)
        return false;
    answer *ans = calloc(n, sizeof *ans);
    if (!ans) {
        o->failed = n;
        weir_log(s->self, WEIR_LOG_ERROR, "%s: out of memory; its hooks did not run%s",
                 EV_NAMES[e], fails_closed(s, e) ? ": the call is blocked" : "");
        return true;
    }
    size_t k = 0;
    for (size_t i = 0; i < s->ngroups; i++) {
        const group *g = &s->groups[i];
        if (g->event != e || !group_matches(g, match))
            continue;
        for (size_t j = 0; j < g->nh; j++) {
            bool dup = false; /* an identical handler runs once */
            for (size_t m = 0; m < k && !dup; m++)
                dup = strcmp(ans[m].h->command, g->h[j].command) == 0 &&
                      !ans[m].h->args == !g->h[j].args && !g->h[j].args;
            if (!dup)
                ans[k++].h = &g->h[j];
        }
    }
    n = k;
    const char *sid = agent ? weir_agent_id(agent) : "";
    char *transcript = transcript_of(s, agent);
    json_t *input = json_pack("{s:s, s:s, s:s, s:s, s:s}", "session_id", sid ? sid : "",
                              "transcript_path", transcript ? transcript : "", "cwd", s->cwd,
                              "permission_mode", "default", "hook_event_name", EV_NAMES[e]);
    free(transcript);
    if (input && fields)
        json_object_update(input, (json_t *)(uintptr_t)fields);
    char *text = json_text(input);
    json_decref(input);
    char **env = make_env(s, sid ? sid : "");
    long long session_end_budget = SESSION_END_MS;
    char ***argvs = calloc(n, sizeof *argvs);
    char **paths = calloc(n, sizeof *paths);
    bool ok = text && env && argvs && paths;
    for (size_t i = 0; ok && i < n; i++) {
        const handler *h = ans[i].h;
        argvs[i] = handler_argv(s, h, &paths[i]);
        ok = argvs[i] != NULL;
        long long t = h->timeout_ms ? h->timeout_ms
                      : s->timeout_ms ? s->timeout_ms
                      : e == EV_PROMPT ? PROMPT_TIMEOUT_MS
                                       : DEFAULT_TIMEOUT_MS;
        if (e == EV_SESSION_END && h->timeout_ms > session_end_budget)
            session_end_budget = h->timeout_ms < SESSION_END_MAX_MS ? h->timeout_ms
                                                                     : SESSION_END_MAX_MS;
        ans[i].p.timeout_ms = t;
        ans[i].p.path = paths[i];
        ans[i].p.argv = argvs[i];
        ans[i].p.input = text;
        ans[i].p.input_len = text ? strlen(text) : 0;
    }
    if (e == EV_SESSION_END)
        for (size_t i = 0; i < n; i++)
            ans[i].p.timeout_ms = session_end_budget;
    hs_proc *procs = ok ? calloc(n, sizeof *procs) : NULL;
    if (procs) {
        for (size_t i = 0; i < n; i++)
            procs[i] = ans[i].p;
        weir_signal *sig = call ? weir_call_signal(call) : NULL;
        if (hs_run(procs, n, env, s->cwd, call_cancelled, sig) == 0)
            for (size_t i = 0; i < n; i++)
                ans[i].p = procs[i];
        else
            ok = false;
        free(procs);
    } else {
        ok = false;
    }
    if (!ok) {
        o->failed = n;
        weir_log(s->self, WEIR_LOG_ERROR, "%s: out of memory; its hooks did not run%s",
                 EV_NAMES[e], fails_closed(s, e) ? ": the call is blocked" : "");
    } else {
        qsort(ans, n, sizeof *ans, by_finish);
        for (size_t i = 0; i < n; i++)
            read_answer(s, e, &ans[i], o);
        if (o->failed)
            report_failures(s, e, o);
    }
    for (size_t i = 0; i < n; i++) {
        if (argvs)
            free_strv(argvs[i]);
        if (paths)
            free(paths[i]);
        hs_proc_clear(&ans[i].p);
        json_decref(ans[i].json);
    }
    free(ans);
    free(argvs);
    free(paths);
    free_strv(env);
    free(text);
    return true;
}

/* A user message carrying a hook's text ({kind:"hook"} source). */
static json_t *hook_message(const state *s, ev e, const char *text) {
    return json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s, s:s}}", "role", "user", "content",
                     "type", "text", "text", text, "source", "kind", "hook", "plugin",
                     weir_plugin_id(s->self), "event", EV_NAMES[e]);
}

/* ------------------------------------------------------------------------ */
/* Listeners                                                                 */
/* ------------------------------------------------------------------------ */

static json_t *deny(const char *reason) {
    return json_pack("{s:s, s:s}", "kind", "deny", "reason", reason);
}

static json_t *tool_input(const json_t *args) {
    const char *text = json_string_value(json_object_get(args, "arguments"));
    json_t *v = text && *text ? json_loads(text, JSON_DECODE_ANY, NULL) : json_object();
    return v ? v : json_string(text ? text : "");
}

/* PreToolUse "ask": the embedder's approver, or a deny saying nobody could. */
static json_t *ask_host(state *s, weir_agent *agent, const json_t *args, const json_t *input,
                        const char *reason, bool *allowed) {
    *allowed = false;
    json_t *req = json_pack("{s:s, s:s, s:s, s:O}", "kind", "tool", "tool",
                            json_string_value(json_object_get(args, "name")), "call_id",
                            json_string_value(json_object_get(args, "call_id")), "arguments",
                            input);
    if (req && reason)
        json_object_set_new(req, "reason", json_string(reason));
    json_t *d = NULL;
    weir_error e = {0};
    int rc = !req ? WEIR_E_NOMEM
             : WEIR_API_HAS(WEIR_PLUGIN_API, agent_approve) && agent
                 ? weir_agent_approve(agent, req, &d, &e)
                 : WEIR_E_NOT_FOUND;
    json_decref(req);
    char buf[1200];
    if (rc != WEIR_OK) {
        snprintf(buf, sizeof buf,
                 "a PreToolUse hook asked for approval%s%s%s, and no one could approve it: %s",
                 reason ? " (" : "", reason ? reason : "", reason ? ")" : "",
                 rc == WEIR_E_NOT_FOUND ? "no host here can answer approval requests"
                 : e.text[0]            ? e.text
                                        : weir_strerror(rc));
        return deny(buf);
    }
    const char *what = json_string_value(json_object_get(d, "decision"));
    const char *why = json_string_value(json_object_get(d, "reason"));
    if (what && strcmp(what, "allow") == 0) {
        *allowed = true;
        json_decref(d);
        return NULL;
    }
    snprintf(buf, sizeof buf, "not approved%s%s", why ? ": " : "", why ? why : "");
    json_decref(d);
    return deny(buf);
}

/* The deny of a call whose `e` hooks could not run (guard_failure "block"). */
static json_t *deny_unrun(ev e, const outcome *o) {
    char first[120], buf[900];
    snprintf(first, sizeof first, "a %s hook could not run (out of memory)", EV_NAMES[e]);
    snprintf(buf, sizeof buf,
             "%s; the call is blocked: a %s hook that cannot run does not allow it "
             "(hooks-shell guard_failure \"block\")",
             o->failure ? o->failure : first, EV_NAMES[e]);
    return deny(buf);
}

/*
 * PermissionRequest at weir's permission point: after the PreToolUse hooks
 * of a call that they did not block.  `input` (borrowed) is what the call
 * would run with; it is not used after the hooks ran.  Returns a deny, or
 * NULL: then *verdict is 1 when a hook allowed the call (0: no decision),
 * and an allow's updatedInput has replaced *updated.
 */
static json_t *permission_request(state *s, weir_call *call, weir_agent *agent,
                                  const char *name, json_t *input, json_t **updated,
                                  int *verdict) {
    *verdict = 0;
    if (!s->has[EV_PERM_REQUEST])
        return NULL;
    json_t *fields = json_pack("{s:s, s:O, s:[]}", "tool_name", name ? name : "", "tool_input",
                               input, "permission_suggestions");
    if (!fields)
        return fails_closed(s, EV_PERM_REQUEST) && any_matches(s, EV_PERM_REQUEST, name)
                   ? deny("hooks-shell: PermissionRequest: out of memory; the call is blocked")
                   : NULL;
    outcome o;
    bool ran = run_event(s, call, agent, EV_PERM_REQUEST, name, fields, &o);
    json_decref(fields);
    if (!ran)
        return NULL;
    json_t *res = NULL;
    const char *aid = agent ? weir_agent_id(agent) : NULL;
    if (o.halt) {
        if (aid)
            set_halt(s, aid, o.stop_reason);
        res = deny(o.stop_reason ? o.stop_reason : "a PermissionRequest hook stopped the agent");
    } else if (o.block) { /* exit 2: nothing overrides it */
        res = deny(o.reason);
    } else if (o.perm == 4) {
        res = deny(o.perm_reason ? o.perm_reason : "denied by a PermissionRequest hook");
    } else if (o.failed && fails_closed(s, EV_PERM_REQUEST)) {
        res = deny_unrun(EV_PERM_REQUEST, &o);
    } else if (o.perm == 1) {
        *verdict = 1;
        if (o.updated_input) {
            json_decref(*updated);
            *updated = o.updated_input;
            o.updated_input = NULL;
        }
    }
    if (res && o.interrupt && !o.halt && aid) /* deny + interrupt: the turn ends too */
        set_halt(s, aid, o.perm_reason ? o.perm_reason
                                       : "interrupted by a PermissionRequest hook");
    outcome_clear(&o);
    return res;
}

static json_t *on_pre_tool(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    weir_agent *agent = weir_call_agent(call);
    const char *name = json_string_value(json_object_get(args, "name"));
    json_t *input = tool_input(args);
    json_t *fields = json_pack("{s:s, s:O, s:s}", "tool_name", name ? name : "", "tool_input",
                               input, "tool_use_id",
                               json_string_value(json_object_get(args, "call_id")));
    if (!fields && fails_closed(s, EV_PRE_TOOL) && any_matches(s, EV_PRE_TOOL, name)) {
        /* out of memory: its guards cannot run, and that does not allow the call */
        json_decref(input);
        weir_call_fail(call, "hooks-shell: PreToolUse: out of memory; the call is blocked");
        return NULL;
    }
    outcome o;
    memset(&o, 0, sizeof o);
    bool ran = fields && run_event(s, call, agent, EV_PRE_TOOL, name, fields, &o);
    json_decref(fields);
    if (!ran && !any_matches(s, EV_PERM_REQUEST, name)) {
        json_decref(input);
        return weir_next(call);
    }
    json_t *res = NULL;
    const char *aid = agent ? weir_agent_id(agent) : NULL;
    if (o.halt && aid)
        set_halt(s, aid, o.stop_reason);
    if (o.halt)
        res = deny(o.stop_reason ? o.stop_reason : "a PreToolUse hook stopped the agent");
    else if (o.block) /* exit 2: nothing overrides it */
        res = deny(o.reason);
    else if (o.perm == 4)
        res = deny(o.perm_reason ? o.perm_reason : "denied by a PreToolUse hook");
    else if (o.perm == 3) {
        if (aid)
            set_halt(s, aid, "tool_deferred: a PreToolUse hook deferred the call");
        res = deny("deferred by a PreToolUse hook: the call did not run, and the turn ends "
                   "(tool_deferred)");
    } else if (o.failed && fails_closed(s, EV_PRE_TOOL)) {
        /* a guard that could not run does not allow the call (docs/hooks-shell.md) */
        res = deny_unrun(EV_PRE_TOOL, &o);
    }
    if (!res) {
        /* not blocked by PreToolUse: the permission decision (PermissionRequest),
         * on the input the call would run with; an ask it leaves open goes to
         * the host */
        int verdict = 0;
        res = permission_request(s, call, agent, name, o.updated_input ? o.updated_input : input,
                                 &o.updated_input, &verdict);
        if (!res && o.perm == 2 && verdict == 0) {
            bool allowed = false;
            res = ask_host(s, agent, args, o.updated_input ? o.updated_input : input,
                           o.perm_reason, &allowed);
        }
    }
    if (!res) {
        const char *cid = json_string_value(json_object_get(args, "call_id"));
        if (o.contexts && cid && aid) { /* next to the result, in tools/post-execute */
            pthread_mutex_lock(&s->mu);
            agent_state *a = agent_get(s, aid);
            if (a)
                json_object_set(a->contexts, cid, o.contexts);
            pthread_mutex_unlock(&s->mu);
        }
        res = weir_next(call);
        const char *kind = json_string_value(json_object_get(res, "kind"));
        if (res && o.updated_input && kind && strcmp(kind, "allow") == 0) {
            json_t *copy = json_deep_copy(res);
            json_decref(res);
            res = copy;
            if (res)
                json_object_set(res, "arguments", o.updated_input);
        }
    }
    json_decref(input);
    outcome_clear(&o);
    return res;
}

/* The text of a result's content blocks (for PostToolUseFailure's error). */
static char *result_text(const json_t *res) { return message_text(res); }

static json_t *on_post_tool(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    json_t *res = weir_next(call);
    if (!res)
        return NULL;
    weir_agent *agent = weir_call_agent(call);
    const char *aid = agent ? weir_agent_id(agent) : NULL;
    const char *cid = json_string_value(json_object_get(args, "call_id"));
    const char *name = json_string_value(json_object_get(args, "name"));
    json_t *pre = NULL;
    if (aid && cid) {
        pthread_mutex_lock(&s->mu);
        agent_state *a = agent_get(s, aid);
        if (a) {
            pre = json_incref(json_object_get(a->contexts, cid));
            json_object_del(a->contexts, cid);
        }
        pthread_mutex_unlock(&s->mu);
    }
    bool failed = json_is_true(json_object_get(res, "is_error"));
    ev e = failed ? EV_POST_TOOL_FAIL : EV_POST_TOOL;
    json_t *input = tool_input(args);
    json_t *fields = json_pack("{s:s, s:O, s:s}", "tool_name", name ? name : "", "tool_input",
                               input, "tool_use_id", cid ? cid : "");
    json_decref(input);
    if (fields && failed) {
        char *t = result_text(res);
        json_object_set_new(fields, "error", json_string(t ? t : ""));
        free(t);
    } else if (fields) {
        json_object_set_new(fields, "tool_response",
                            json_pack("{s:O, s:b}", "content", json_object_get(res, "content"),
                                      "is_error", 0));
    }
    outcome o;
    bool ran = fields && s->has[e] && run_event(s, call, agent, e, name, fields, &o);
    json_decref(fields);
    if (!ran)
        memset(&o, 0, sizeof o);
    if (!ran && !pre)
        return res;
    json_t *out = json_deep_copy(res);
    json_decref(res);
    if (!out) {
        json_decref(pre);
        outcome_clear(&o);
        weir_call_fail(call, "hooks-shell: out of memory");
        return NULL;
    }
    if (o.halt && aid)
        set_halt(s, aid, o.stop_reason);
    if (o.updated_output) {
        json_t *content = NULL;
        if (json_is_string(o.updated_output))
            content = json_pack("[{s:s, s:O}]", "type", "text", "text", o.updated_output);
        else if (json_is_array(o.updated_output))
            content = json_incref(o.updated_output);
        else if (json_is_array(json_object_get(o.updated_output, "content")))
            content = json_incref(json_object_get(o.updated_output, "content"));
        else {
            char *t = json_text(o.updated_output);
            content = t ? json_pack("[{s:s, s:s}]", "type", "text", "text", t) : NULL;
            free(t);
        }
        if (content)
            json_object_set_new(out, "content", content);
    }
    json_t *ctxs = json_object_get(out, "additional_contexts");
    if (!json_is_array(ctxs)) {
        ctxs = json_array();
        json_object_set_new(out, "additional_contexts", ctxs);
    }
    size_t i;
    json_t *v;
    json_array_foreach(pre, i, v) json_array_append_new(
        ctxs, hook_message(s, EV_PRE_TOOL, json_string_value(v)));
    if (o.block && o.reason) /* decision:block's reason, or exit 2's stderr */
        json_array_append_new(ctxs, hook_message(s, e, o.reason));
    json_array_foreach(o.contexts, i, v) json_array_append_new(
        ctxs, hook_message(s, e, json_string_value(v)));
    if (json_array_size(ctxs) == 0)
        json_object_del(out, "additional_contexts");
    json_decref(pre);
    outcome_clear(&o);
    return out;
}

static json_t *reject(const char *reason) {
    return json_pack("{s:s, s:s}", "kind", "reject", "reason", reason);
}

static json_t *on_pre_step(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    weir_agent *agent = weir_call_agent(call);
    const char *aid = agent ? weir_agent_id(agent) : NULL;
    char *halt = aid ? take_halt(s, aid) : NULL;
    if (halt) {
        json_t *r = reject(halt);
        free(halt);
        return r;
    }
    if (!s->has[EV_PROMPT])
        return weir_next(call);
    char *prompt = NULL;
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(args, "messages"), i, m) {
        const char *kind = json_string_value(json_object_get(json_object_get(m, "source"), "kind"));
        if (kind && strcmp(kind, "human") != 0)
            continue; /* entered human input only */
        char *t = message_text(m);
        prompt = prompt ? join2(prompt, t) : (t ? strdup(t) : NULL);
        free(t);
    }
    if (!prompt)
        return weir_next(call);
    json_t *fields = json_pack("{s:s}", "prompt", prompt);
    free(prompt);
    outcome o;
    bool ran = fields && run_event(s, call, agent, EV_PROMPT, NULL, fields, &o);
    json_decref(fields);
    if (!ran)
        return weir_next(call);
    json_t *res;
    if (o.halt)
        res = reject(o.stop_reason ? o.stop_reason : "a UserPromptSubmit hook stopped the agent");
    else if (o.block)
        res = reject(o.reason);
    else {
        res = weir_next(call);
        const char *kind = json_string_value(json_object_get(res, "kind"));
        if (res && o.contexts && kind && strcmp(kind, "enter") == 0) {
            json_t *copy = json_deep_copy(res);
            json_decref(res);
            res = copy;
            json_t *msgs = json_object_get(res, "messages");
            const json_t *v;
            json_array_foreach(o.contexts, i, v) json_array_append_new(
                msgs, hook_message(s, EV_PROMPT, json_string_value(v)));
        }
    }
    outcome_clear(&o);
    return res;
}

/* The text of the agent's last assistant/message (malloc'd). */
static char *last_assistant(weir_agent *agent) {
    json_t *env = agent ? weir_agent_last_event(agent, "assistant/message") : NULL;
    char *t = message_text(json_object_get(json_object_get(env, "data"), "message"));
    json_decref(env);
    return t ? t : strdup("");
}

static json_t *on_turn_stopping(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    weir_agent *agent = weir_call_agent(call);
    const char *aid = agent ? weir_agent_id(agent) : NULL;
    json_int_t turn = json_integer_value(json_object_get(args, "turn"));
    int count = 0;
    if (aid) {
        pthread_mutex_lock(&s->mu);
        agent_state *a = agent_get(s, aid);
        if (a && a->stop_turn != turn) {
            a->stop_turn = turn;
            a->stop_count = 0;
        }
        count = a ? a->stop_count : 0;
        pthread_mutex_unlock(&s->mu);
    }
    char *last = last_assistant(agent);
    json_t *fields = json_pack("{s:b, s:s, s:[], s:[]}", "stop_hook_active", count > 0,
                               "last_assistant_message", last ? last : "", "background_tasks",
                               "session_crons");
    free(last);
    outcome o;
    bool ran = fields && run_event(s, call, agent, EV_STOP, NULL, fields, &o);
    json_decref(fields);
    if (!ran)
        return json_null();
    char *text = NULL;
    if (!o.halt && (o.block || o.contexts)) {
        if (o.block)
            text = join2(text, o.reason);
        size_t i;
        json_t *v;
        json_array_foreach(o.contexts, i, v) text = join2(text, json_string_value(v));
    }
    if (text && count >= STOP_BLOCK_CAP) {
        weir_log(s->self, WEIR_LOG_WARN,
                 "Stop hooks kept the turn going %d times in a row: it ends now", count);
    } else if (text && agent) {
        json_t *msg = hook_message(s, EV_STOP, text);
        weir_error e = {0};
        int rc = msg ? weir_agent_send(agent, msg, WEIR_SEND_STEER, NULL, &e) : WEIR_E_NOMEM;
        json_decref(msg);
        if (rc != WEIR_OK)
            weir_log(s->self, WEIR_LOG_WARN, "a Stop hook's reason to go on was not queued: %s",
                     e.text[0] ? e.text : weir_strerror(rc));
        else {
            pthread_mutex_lock(&s->mu);
            agent_state *a = agent_get(s, aid);
            if (a)
                a->stop_count++;
            pthread_mutex_unlock(&s->mu);
        }
    }
    free(text);
    outcome_clear(&o);
    return json_null();
}

static json_t *on_pre_compact(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    const char *trigger = json_string_value(json_object_get(args, "trigger"));
    const char *instr = json_string_value(json_object_get(args, "instructions"));
    json_t *fields = json_pack("{s:s, s:s}", "trigger", trigger ? trigger : "auto",
                               "custom_instructions", instr ? instr : "");
    outcome o;
    bool ran = fields &&
               run_event(s, call, weir_call_agent(call), EV_PRE_COMPACT, trigger, fields, &o);
    json_decref(fields);
    if (!ran)
        return weir_next(call);
    json_t *res = o.block ? json_pack("{s:s, s:s}", "kind", "block", "reason",
                                      o.reason ? o.reason : "blocked by a PreCompact hook")
                          : weir_next(call);
    outcome_clear(&o);
    return res;
}

static json_t *on_created(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    weir_agent *agent = weir_call_agent(call);
    free(transcript_of(s, agent)); /* remember the log's path while it is open */
    if (!s->has[EV_SESSION_START])
        return json_null();
    const char *source = json_string_value(json_object_get(args, "source"));
    json_t *fields = json_pack("{s:s}", "source", source ? source : "startup");
    outcome o;
    bool ran = fields && run_event(s, call, agent, EV_SESSION_START, source, fields, &o);
    json_decref(fields);
    if (!ran)
        return json_null();
    if (o.block && o.reason) /* cannot block: stderr is for the user */
        weir_log(s->self, WEIR_LOG_WARN, "SessionStart hook: %s", o.reason);
    size_t i;
    json_t *v;
    json_array_foreach(agent ? o.contexts : NULL, i, v) {
        json_t *msg = hook_message(s, EV_SESSION_START, json_string_value(v));
        weir_error e = {0};
        int rc = msg ? weir_agent_send(agent, msg, WEIR_SEND_INJECT, NULL, &e) : WEIR_E_NOMEM;
        json_decref(msg);
        if (rc != WEIR_OK)
            weir_log(s->self, WEIR_LOG_WARN, "SessionStart context was not queued: %s",
                     e.text[0] ? e.text : weir_strerror(rc));
    }
    outcome_clear(&o);
    return json_null();
}

static json_t *on_disposed(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    const char *id = json_string_value(json_object_get(args, "agent"));
    if (s->has[EV_SESSION_END] && id) {
        json_t *fields = json_pack("{s:s}", "reason", "other");
        outcome o;
        /* the log may be gone: the remembered path, and no agent calls */
        if (fields && run_event(s, NULL, NULL, EV_SESSION_END, "other", fields, &o))
            outcome_clear(&o);
        json_decref(fields);
    }
    (void)call;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; id && i < s->nagents; i++) {
        if (strcmp(s->agents[i]->id, id) == 0) {
            agent_free(s->agents[i]);
            s->agents[i] = s->agents[--s->nagents];
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Init                                                                      */
/* ------------------------------------------------------------------------ */

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)api;
    json_t *schema = json_loads(config_schema, 0, NULL);
    if (!schema)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    char msg[512];
    int bad = weir_schema_validate(schema, config, msg, sizeof msg);
    json_decref(schema);
    if (bad)
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "config: %s", msg);
    state *s = calloc(1, sizeof *s);
    if (!s)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->self = self;
    int rc = load_config(s, config, err);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = s;
    struct {
        bool on;
        const char *hook;
        weir_hook_fn fn;
    } regs[] = {
        {s->has[EV_PRE_TOOL] || s->has[EV_PERM_REQUEST], "tools/pre-execute", on_pre_tool},
        {s->has[EV_PRE_TOOL] || s->has[EV_POST_TOOL] || s->has[EV_POST_TOOL_FAIL],
         "tools/post-execute", on_post_tool},
        {true, "agent/pre-step", on_pre_step}, /* continue:false ends the turn here */
        {s->has[EV_STOP], "agent/turn-stopping", on_turn_stopping},
        {s->has[EV_PRE_COMPACT], "agent/pre-compact", on_pre_compact},
        {true, "agent/created", on_created},
        {true, "agent/disposed", on_disposed},
    };
    for (size_t i = 0; rc == WEIR_OK && i < sizeof regs / sizeof regs[0]; i++)
        if (regs[i].on)
            rc = weir_hook_register(self, regs[i].hook, regs[i].fn, &opts);
    if (rc != WEIR_OK) {
        state_free(s);
        return rc;
    }
    size_t total = 0;
    for (size_t i = 0; i < s->ngroups; i++)
        total += s->groups[i].nh;
    weir_log(self, WEIR_LOG_DEBUG, "%zu command hooks in %zu groups; cwd %s", total, s->ngroups,
             s->cwd);
    weir_plugin_set_data(self, s);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { state_free(weir_plugin_data(self)); }

static const weir_plugin_desc descriptor = {
    WEIR_PLUGIN_HEADER,
    .name = PLUGIN_NAME,
    .version = "0.1.0",
    .description = "Claude Code's command hooks (settings.json \"hooks\") on weir's hooks",
    .config_schema = config_schema,
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(descriptor)
