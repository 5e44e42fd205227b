/*
 * sdk/testkit/testkit_turn.c - weir_tk_run_turn() (weir/testkit.h): one
 * scripted turn through a real host.  The plugin under test is one row of a
 * deployment whose provider is provider-scripted playing the test's script;
 * the agent's own llm/stream listener records every request as the
 * provider gets it, on_event the live events, and the session log (in a
 * temporary directory, removed at the end) is read back whole.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weir/host.h"
#include "weir/testkit.h"

#include "host_int.h"
#include "session_log.h"

#define SESSION_ID "testkit"

typedef struct run {
    json_t *requests; /* [request] */
    json_t *events;   /* [{type, data}] */
    bool oom;
} run;

static void keep(run *r, json_t *array, json_t *value) {
    if (!value || json_array_append_new(array, value) != 0)
        r->oom = true;
}

/* The agent's own llm/stream listener: the request as the provider gets it
 * (the chain's args are the same for every listener). */
static json_t *record_request(weir_call *call, const json_t *args, void *user_data) {
    run *r = user_data;
    const json_t *request = json_object_get(args, "request");
    if (request)
        keep(r, r->requests, json_deep_copy(request));
    return weir_host_api()->next(call);
}

static void record_event(const json_t *event, bool durable, void *user_data) {
    if (durable) /* the log is read back whole at the end */
        return;
    run *r = user_data;
    keep(r, r->events,
         json_pack("{s:O, s:o}", "type", json_object_get(event, "type"), "data",
                   json_deep_copy(json_object_get(event, "data"))));
}

/* The generated deployment, with turn->deployment merged in (new), or NULL. */
static json_t *build_config(const weir_tk_turn *t, const char *dir, weir_error *err) {
    /* the script is provider-scripted's config, its replies inline */
    json_t *scripted = json_deep_copy(t->script);
    int bad = !scripted;
    if (!bad && !json_object_get(scripted, "models"))
        bad = json_object_set_new(scripted, "models",
                                  json_pack("{s:{s:i, s:i}}", "scripted", "context_window",
                                            32768, "max_output", 4096));
    json_t *cfg = bad ? NULL
                      : json_pack("{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[], s:[{s:s, s:s, s:O}]}",
                                  "agent", "provider", "scripted", "model", "scripted",
                                  "max_tokens", 1024, "session", "dir", dir, "fsync", "none",
                                  "plugin_path", "plugins", "id", "scripted", "plugin",
                                  "provider-scripted", "config", scripted);
    json_decref(scripted);
    json_t *path = json_object_get(cfg, "plugin_path");
    json_t *rows = json_object_get(cfg, "plugins");
    bad = !cfg;
    if (!bad && t->plugin_path)
        bad = json_array_append_new(path, json_string(t->plugin_path));
    if (!bad && t->plugin) {
        json_t *row = json_pack("{s:s, s:s, s:o}", "id", t->id ? t->id : "plugin", "plugin",
                                t->plugin, "config",
                                t->config ? json_deep_copy(t->config) : json_object());
        bad = json_array_append_new(rows, row);
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)(uintptr_t)t->deployment, key, value) {
        if (bad)
            break;
        json_t *mine = json_object_get(cfg, key);
        json_t *copy = json_deep_copy(value);
        if (!copy)
            bad = 1;
        else if ((!strcmp(key, "agent") || !strcmp(key, "session")) && json_is_object(value))
            bad = json_object_update(mine, copy);
        else if ((!strcmp(key, "plugins") || !strcmp(key, "plugin_path")) &&
                 json_is_array(value))
            bad = json_array_extend(mine, copy);
        else
            bad = json_object_set(cfg, key, copy);
        json_decref(copy);
    }
    if (bad) {
        json_decref(cfg);
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
        return NULL;
    }
    return cfg;
}

/* The session log's envelopes (new array), or NULL with `err`. */
static json_t *read_log(const char *path, weir_error *err) {
    char *buf = NULL;
    size_t len = 0;
    if (weir__log_read_file(path, &buf, &len, err) != WEIR_OK)
        return NULL;
    json_t *events = json_array();
    for (size_t off = 0; events && off < len;) {
        const char *nl = memchr(buf + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - buf) : len;
        if (end > off) {
            json_t *ev = weir__json_loadb(buf + off, end - off, 0, NULL);
            if (!ev || json_array_append_new(events, ev) != 0) {
                json_decref(events);
                events = NULL;
            }
        }
        off = end + 1;
    }
    weir__free(buf);
    if (!events)
        weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL, "weir_tk_run_turn: cannot read %s", path);
    return events;
}

/* The text of the last system/message in `log` (new string), or json null. */
static json_t *system_text(const json_t *log) {
    for (size_t i = json_array_size(log); i-- > 0;) {
        const json_t *ev = json_array_get(log, i);
        if (strcmp(weir__json_str(ev, "type", ""), "system/message") != 0)
            continue;
        const json_t *content =
            json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content");
        json_t *parts = json_array();
        size_t j;
        const json_t *b;
        json_array_foreach(content, j, b) {
            const char *text = weir__json_str(b, "text", NULL);
            if (text && parts)
                json_array_append_new(parts, json_string(text));
        }
        size_t total = 1;
        json_t *p;
        json_array_foreach(parts, j, p) total += json_string_length(p);
        char *joined = weir__malloc(total);
        json_t *out = NULL;
        if (joined) {
            joined[0] = '\0';
            json_array_foreach(parts, j, p) strcat(joined, json_string_value(p));
            out = json_string(joined);
        }
        weir__free(joined);
        json_decref(parts);
        return out;
    }
    return json_null();
}

/* Remove the temporary session directory and what the run left in it. */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *path = weir__asprintf("%s/%s", dir, e->d_name);
        if (path)
            unlink(path);
        weir__free(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* {turn, kind, failure?, text} from the agent's last turn (new), or NULL. */
static json_t *end_of(weir_agent *agent, weir_error *err) {
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    if (weir_agent_last_turn(agent, &o, err) != WEIR_OK)
        return NULL;
    json_t *end = json_pack("{s:i, s:s, s:s}", "turn", o.turn, "kind", o.kind, "text",
                            o.text ? o.text : "");
    if (end && o.failure_code[0] &&
        json_object_set_new(end, "failure",
                            json_pack("{s:s, s:s}", "code", o.failure_code, "message",
                                      o.failure_message)) != 0) {
        json_decref(end);
        end = NULL;
    }
    weir_turn_outcome_clear(&o);
    if (!end)
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
    return end;
}

/* The 0.1 struct: up to plugin_path. */
#define TURN_V1_SIZE (offsetof(weir_tk_turn, plugin_path) + sizeof(const char *))

/* The prompts of `t` (new array of strings), or NULL when they are missing
 * or not strings. */
static json_t *prompts_of(const weir_tk_turn *t) {
    const json_t *many = t->struct_size >= sizeof *t ? t->prompts : NULL;
    if (!many)
        return t->prompt ? json_pack("[s]", t->prompt) : NULL;
    size_t i;
    const json_t *p;
    json_array_foreach(many, i, p) {
        if (!json_is_string(p))
            return NULL;
    }
    return json_array_size(many) > 0 ? json_copy((json_t *)(uintptr_t)many) : NULL;
}

int weir_tk_run_turn(const weir_tk_turn *t, json_t **result, weir_error *err) {
    if (result)
        *result = NULL;
    json_t *prompts = t && t->struct_size >= TURN_V1_SIZE ? prompts_of(t) : NULL;
    if (!t || !result || t->struct_size < TURN_V1_SIZE || !prompts ||
        !json_is_array(json_object_get(t->script, "replies")) ||
        (t->deployment && !json_is_object(t->deployment))) {
        json_decref(prompts);
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_run_turn: needs a weir_tk_turn (struct_size set), a prompt "
                         "or prompts (an array of strings), a script {\"replies\":[...]} and "
                         "an object or NULL deployment");
    }
    bool fake = t->struct_size >= sizeof *t && t->fake_clock;
    bool own_clock = fake && !weir__clock_is_fake();
    const char *tmp = getenv("TMPDIR");
    char *dir = weir__asprintf("%s/weir-tk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!dir) {
        json_decref(prompts);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
    }
    if (!mkdtemp(dir)) {
        int rc = weir__err(err, WEIR_E_IO, NULL, NULL,
                           "weir_tk_run_turn: cannot create a temporary directory %s",
                           dir);
        weir__free(dir);
        json_decref(prompts);
        return rc;
    }
    if (own_clock)
        weir__clock_fake(t->clock_start_ms);
    run r = {json_array(), json_array(), false};
    json_t *cfg = r.requests && r.events ? build_config(t, dir, err) : NULL;
    weir_host *host = NULL;
    weir_agent *agent = NULL;
    json_t *ends = json_array(), *log = NULL;
    char *log_path = NULL;
    int rc = cfg && ends ? WEIR_OK : err && err->code ? (int)err->code : WEIR_E_NOMEM;
    if (rc == WEIR_OK)
        rc = weir_host_create(cfg, &host, err);
    if (rc == WEIR_OK) {
        weir_hook_opts hopts = WEIR_HOOK_OPTS_INIT;
        hopts.user_data = &r;
        weir_agent_hook own = {"llm/stream", record_request, &hopts};
        weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
        opts.session_id = SESSION_ID;
        opts.on_event = record_event;
        opts.user_data = &r;
        opts.hooks = &own;
        opts.nhooks = 1;
        rc = weir_agent_open(host, &opts, &agent, err);
    }
    for (size_t i = 0; rc == WEIR_OK && i < json_array_size(prompts); i++) {
        const char *prompt = json_string_value(json_array_get(prompts, i));
        rc = weir_agent_send_text(agent, prompt, WEIR_SEND_FOLLOWUP, err);
        if (rc == WEIR_OK)
            rc = weir_agent_run_until_idle(agent, err);
        json_t *end = rc == WEIR_OK ? end_of(agent, err) : NULL;
        if (rc == WEIR_OK && (!end || json_array_append_new(ends, end) != 0))
            rc = err && err->code ? (int)err->code : WEIR_E_NOMEM;
    }
    if (rc == WEIR_OK && !(log_path = weir__strdup(weir_agent_log_path(agent))))
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
    weir_agent_close(agent); /* the log is complete and unlocked from here */
    weir_host_destroy(host);
    uint64_t clock = weir__clock_ms();
    if (own_clock)
        weir__clock_real();
    if (rc == WEIR_OK && !(log = read_log(log_path, err)))
        rc = err && err->code ? (int)err->code : WEIR_E_NOMEM;
    if (rc == WEIR_OK && r.oom)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
    if (rc == WEIR_OK) {
        json_t *system = system_text(log);
        json_t *end = json_array_get(ends, json_array_size(ends) - 1);
        if (system) { /* json_pack steals the "o" values, even when it fails */
            *result = json_pack("{s:s, s:O, s:O, s:o, s:O, s:o, s:O}", "session_id", SESSION_ID,
                                "end", end, "ends", ends, "system", system, "requests",
                                r.requests, "log", log, "events", r.events);
            log = NULL;
        }
        if (*result && fake &&
            json_object_set_new(*result, "clock_ms", json_integer((json_int_t)clock)) != 0) {
            json_decref(*result);
            *result = NULL;
        }
        if (!*result)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_run_turn: out of memory");
    }
    json_decref(ends);
    json_decref(log);
    json_decref(prompts);
    json_decref(r.requests);
    json_decref(r.events);
    json_decref(cfg);
    weir__free(log_path);
    remove_dir(dir);
    weir__free(dir);
    return rc;
}
