/*
 * core/api/provenance.c - the hook chains' provenance records as session log
 * events (core/api/provenance.h).
 */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "host_int.h"
#include "provenance.h"

static json_t *int_of(const json_t *args, const char *key) {
    const json_t *v = json_object_get(args, key);
    return json_integer(json_is_integer(v) ? json_integer_value(v) : 0);
}

void weir__provenance_sink(weir_agent *a, const weir__hook_record *rec) {
    if (!a || !a->e.log || !rec)
        return;
    char plugin[256];
    if (rec->owner && rec->owner->desc)
        snprintf(plugin, sizeof plugin, "%s@%s", rec->owner->desc->name,
                 rec->owner->desc->version ? rec->owner->desc->version : "?");
    else
        snprintf(plugin, sizeof plugin, "%s", rec->row); /* an embedder's listener */
    json_t *d = json_pack("{s:s, s:s, s:s}", "hook", rec->hook, "plugin", plugin, "row", rec->row);
    bool decision = !strcmp(rec->type, "hook/decision");
    int bad = !d;
    if (!bad && decision)
        bad |= json_object_set_new(d, "decision", json_string(rec->decision));
    if (!bad) {
        bad |= json_object_set_new(d, "turn", int_of(rec->args, "turn"));
        bad |= json_object_set_new(d, "step", int_of(rec->args, "step"));
    }
    /* agent/admit's payload names its input (never its content) */
    const json_t *input = json_object_get(rec->args, "input_id");
    if (!bad && json_is_string(input))
        bad |= json_object_set_new(d, "input_id", json_string(json_string_value(input)));
    if (!bad && strcmp(rec->type, "hook/quarantined") != 0)
        bad |= json_object_set_new(d, "latency_us", json_integer((json_int_t)rec->latency_us));
    if (!bad && rec->budget_ms)
        bad |= json_object_set_new(d, "budget_ms", json_integer(rec->budget_ms));
    if (!bad && rec->failures)
        bad |= json_object_set_new(d, "failures", json_integer(rec->failures));
    if (!bad && rec->detail)
        bad |= json_object_set_new(d, decision ? "detail" : "error", json_string(rec->detail));
    weir_error e;
    weir_error_clear(&e);
    int rc = bad ? WEIR_E_NOMEM
                 : weir__log_append(a->e.log, rec->type, d, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL,
                                    &e);
    json_decref(d);
    if (rc != WEIR_OK)
        weir__warn("weir: warning: %s %s (row %s) not logged: %s", rec->type, rec->hook,
                   rec->row, e.text[0] ? e.text : weir_strerror(rc));
}

size_t weir__provenance_mark(weir_agent *a) {
    return a && a->e.inbox ? weir__inbox_count(a->e.inbox, true) : 0;
}
