/*
 * myplugin.c - a PII guard, made from weir's plugin template
 * (`weir new-plugin --kind guard`): make the policy yours.
 *
 * tools/pre-execute: a call whose arguments (their JSON text) match one of
 * `deny_patterns` (POSIX extended regular expressions) is denied, naming
 * the pattern.  agent/admit: every e-mail address in the text of an input
 * (a send, a steer, a queued input) is replaced by "[e-mail]" before
 * anything of the input is logged, so neither the session log nor the
 * model ever holds it.
 * Config: {"deny_patterns": ["rm -rf", "DROP TABLE"], "redact_emails": true}
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

#define MAX_PATTERNS 32

typedef struct myplugin {
    regex_t deny[MAX_PATTERNS];
    json_t *patterns; /* their texts (a copy of deny_patterns) */
    size_t ndeny;
    bool redact;
    regex_t email;
} myplugin;

/* tools/pre-execute (waterfall): deny a call whose arguments match. */
static json_t *on_pre_execute(weir_call *call, const json_t *args, void *user_data) {
    const myplugin *st = user_data;
    char *text = json_dumps(json_object_get(args, "arguments"), JSON_COMPACT);
    if (!text) {
        weir_call_fail(call, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < st->ndeny; i++) {
        if (regexec(&st->deny[i], text, 0, NULL, 0) == 0) {
            free(text);
            char reason[300];
            snprintf(reason, sizeof reason, "the arguments match '%s'",
                     json_string_value(json_array_get(st->patterns, i)));
            return json_pack("{s:s, s:s}", "kind", "deny", "reason", reason);
        }
    }
    free(text);
    return weir_next(call);
}

/* `text` with every e-mail address replaced (malloc'd), or NULL when none or
 * out of memory. */
static char *redact_emails(const regex_t *email, const char *text) {
    regmatch_t m;
    if (regexec(email, text, 1, &m, 0) != 0)
        return NULL;
    size_t cap = 2 * strlen(text) + 9, len = 0; /* an address has 6 characters or more */
    char *out = malloc(cap);
    for (const char *p = text; out;) {
        if (regexec(email, p, 1, &m, p == text ? 0 : REG_NOTBOL) != 0) {
            strcpy(out + len, p);
            break;
        }
        memcpy(out + len, p, (size_t)m.rm_so);
        len += (size_t)m.rm_so;
        memcpy(out + len, "[e-mail]", 8);
        len += 8;
        p += m.rm_eo;
    }
    return out;
}

/* agent/admit (waterfall): admit the input as the inner listeners admit it
 * (or as sent), its e-mail addresses redacted. */
static json_t *on_admit(weir_call *call, const json_t *args, void *user_data) {
    const myplugin *st = user_data;
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
        if (oom || !text || regexec(&st->email, text, 0, NULL, 0) != 0)
            continue; /* no address in this block */
        char *clean = redact_emails(&st->email, text);
        oom = !clean || json_object_set_new(block, "text", json_string(clean)) != 0;
        changed = true;
        free(clean);
    }
    json_t *out = oom || !changed ? NULL
                                  : json_pack("{s:s, s:O}", "kind", "admit", "message", msg);
    json_decref(msg);
    if (!oom && !changed)
        return next; /* no address: the input as it came */
    json_decref(next);
    if (!out) /* out of memory: the input is refused (a guard fails closed) */
        weir_call_fail(call, "out of memory");
    return out;
}

static void free_state(myplugin *st) {
    for (size_t i = 0; i < st->ndeny; i++)
        regfree(&st->deny[i]);
    json_decref(st->patterns);
    regfree(&st->email);
    free(st);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)api;
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    const json_t *patterns = NULL;
    myplugin *st = calloc(1, sizeof *st);
    if (!st || regcomp(&st->email, "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}",
                       REG_EXTENDED) != 0) {
        free(st);
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    }
    weir_config_array(&rd, "deny_patterns", 0, MAX_PATTERNS, JSON_STRING, &patterns);
    weir_config_bool(&rd, "redact_emails", true, &st->redact);
    if (patterns && !(st->patterns = json_deep_copy(patterns))) {
        free_state(st);
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    }
    size_t i;
    const json_t *p;
    json_array_foreach(st->patterns, i, p) {
        if (regcomp(&st->deny[i], json_string_value(p), REG_EXTENDED | REG_NOSUB) != 0) {
            free_state(st);
            return weir_error_fill(err, WEIR_E_PLUGIN_CONFIG,
                                   "row '%s': config field 'deny_patterns': item %zu: not a "
                                   "regular expression", weir_plugin_id(self), i);
        }
        st->ndeny++;
    }
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = st;
    int rc = rd.status;
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "tools/pre-execute", on_pre_execute, &opts);
    if (rc == WEIR_OK && st->redact)
        rc = weir_hook_register(self, "agent/admit", on_admit, &opts);
    if (rc != WEIR_OK) {
        free_state(st);
        return rc;
    }
    weir_plugin_set_data(self, st);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { free_state(weir_plugin_data(self)); }

static const weir_plugin_desc myplugin_desc = {
    WEIR_PLUGIN_HEADER_MIN(12),
    .name = "myplugin",
    .version = "0.1.0",
    .description = "Template: denies tool calls by pattern and redacts e-mail addresses at admission",
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(myplugin_desc)
