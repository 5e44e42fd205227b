/*
 * examples/pii-guard/pii_guard.c - a PII guard, built as weir-pii-guard.so.
 *
 * agent/admit: every e-mail address in the text of an input (a send, a steer,
 * a queued input) becomes "[email]" before anything of it is logged, so the
 * log and the model never see it.  tools/pre-execute: a call whose arguments
 * (as JSON text) match one of `deny_patterns` (POSIX extended regular
 * expressions) is denied.  Config: {"deny_patterns": ["rm -rf", "DROP +TABLE"]}
 */
#define _POSIX_C_SOURCE 200809L /* regex */

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

#define MAX_PATTERNS 32
#define EMAIL "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}"

typedef struct guard {
    regex_t email;
    regex_t deny[MAX_PATTERNS];
    size_t ndeny;
} guard;

/* `text` with every address replaced by "[email]" (malloc'd; NULL: no memory). */
static char *redact(const regex_t *email, const char *text) {
    regmatch_t m;
    size_t len = 0;
    char *out = malloc(2 * strlen(text) + 1); /* an address (6 bytes or more) becomes 7 */
    for (const char *p = text; out; p += m.rm_eo) {
        if (regexec(email, p, 1, &m, p == text ? 0 : REG_NOTBOL) != 0) {
            strcpy(out + len, p);
            break;
        }
        memcpy(out + len, p, (size_t)m.rm_so);
        memcpy(out + len + m.rm_so, "[email]", 7);
        len += (size_t)m.rm_so + 7;
    }
    return out;
}

/* agent/admit (waterfall): admit the input as the inner listeners admit it
 * (or as sent), its addresses replaced. */
static json_t *on_admit(weir_call *call, const json_t *args, void *user_data) {
    const guard *g = user_data;
    json_t *next = weir_next(call);
    const char *kind = json_string_value(json_object_get(next, "kind"));
    if (!kind || strcmp(kind, "admit") != 0)
        return next; /* an inner failure or refusal stands */
    const json_t *given = json_object_get(next, "message");
    /* what weir_next returned and the payload may be shared: change a copy */
    json_t *msg = json_deep_copy(given ? given : json_object_get(args, "message"));
    bool changed = false, oom = !msg;
    size_t i;
    json_t *block;
    json_array_foreach(json_object_get(msg, "content"), i, block) {
        const char *text = json_string_value(json_object_get(block, "text"));
        if (oom || !text || regexec(&g->email, text, 0, NULL, 0) != 0)
            continue;
        char *clean = redact(&g->email, text);
        oom = !clean || json_object_set_new(block, "text", json_string(clean)) != 0;
        changed = true;
        free(clean);
    }
    json_t *out = oom || !changed ? NULL : json_pack("{s:s, s:O}", "kind", "admit", "message", msg);
    json_decref(msg);
    if (!oom && !changed)
        return next; /* no address: the input as it came */
    json_decref(next);
    if (!out) /* out of memory: the input is refused (a guard fails closed) */
        weir_call_fail(call, "out of memory redacting an input");
    return out;
}

/* tools/pre-execute (waterfall): deny a call whose arguments match. */
static json_t *on_pre_execute(weir_call *call, const json_t *args, void *user_data) {
    const guard *g = user_data;
    char *text = json_dumps(json_object_get(args, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
    bool oom = !text;
    size_t i = 0;
    while (!oom && i < g->ndeny && regexec(&g->deny[i], text, 0, NULL, 0) != 0)
        i++;
    free(text);
    if (!oom && i == g->ndeny)
        return weir_next(call);
    json_t *out = oom ? NULL : json_pack("{s:s, s:o}", "kind", "deny", "reason",
                                         json_sprintf("the arguments match deny_patterns[%zu]", i));
    if (!out) /* out of memory: the call does not run (a guard fails closed) */
        weir_call_fail(call, "out of memory");
    return out;
}

static void guard_free(guard *g) {
    for (size_t i = 0; i < g->ndeny; i++)
        regfree(&g->deny[i]);
    regfree(&g->email);
    free(g);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)api;
    const char *row = weir_plugin_id(self);
    const json_t *patterns = NULL;
    weir_config_reader rd = weir_config_reader_init(config, row, err);
    weir_config_array(&rd, "deny_patterns", 0, MAX_PATTERNS, JSON_STRING, &patterns);
    guard *g = calloc(1, sizeof *g);
    if (!g || regcomp(&g->email, EMAIL, REG_EXTENDED) != 0) {
        free(g);
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    }
    size_t i;
    const json_t *p;
    json_array_foreach(patterns, i, p) { /* compiled: the config is only lent to init */
        if (regcomp(&g->deny[i], json_string_value(p), REG_EXTENDED | REG_NOSUB) != 0) {
            guard_free(g);
            return weir_error_fill(err, WEIR_E_PLUGIN_CONFIG, "row '%s': config field "
                                   "'deny_patterns': item %zu: not a regular expression", row, i);
        }
        g->ndeny++;
    }
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = g;
    int rc = rd.status; /* a bad config: deny_patterns is NULL, nothing was compiled */
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/admit", on_admit, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "tools/pre-execute", on_pre_execute, &opts);
    if (rc != WEIR_OK) /* fini does not run after a failed init */
        guard_free(g);
    else
        weir_plugin_set_data(self, g);
    return rc;
}

static void fini(weir_plugin *self) { guard_free(weir_plugin_data(self)); }

static const weir_plugin_desc pii_guard_desc = {
    WEIR_PLUGIN_HEADER_MIN(12), .name = "pii-guard", .version = "1.0.0",
    .description = "Example: redacts e-mail addresses at admission, denies tool calls by pattern",
    .init = init, .fini = fini};

WEIR_PLUGIN_DEFINE(pii_guard_desc)
