/*
 * core/log/log_fold.c - the tool-call fold of one step of a session log (see
 * core/log/log_fold.h): the one place that says which of a step's calls a crash
 * or a bug left unanswered, for the driver's crash recovery, the log's
 * repair and the checker.
 */
#include <stdint.h>
#include <string.h>

#include "log_fold.h"

const char *weir__log_result_call_id(const json_t *ev) {
    if (json_is_object(json_object_get(ev, "surface_op")))
        return NULL;
    const json_t *content =
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content");
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "tool_result") == 0)
            return weir__json_str(b, "call_id", NULL);
    }
    return NULL;
}

int weir__call_fold_init(weir__call_fold *f) {
    f->wanted = json_array();
    f->pending = json_array();
    f->offered = json_object();
    f->called = json_object();
    if (f->wanted && f->pending && f->offered && f->called)
        return WEIR_OK;
    weir__call_fold_free(f);
    return WEIR_E_NOMEM;
}

void weir__call_fold_reset(weir__call_fold *f) {
    json_array_clear(f->wanted);
    json_array_clear(f->pending);
    json_object_clear(f->offered);
    json_object_clear(f->called);
}

void weir__call_fold_free(weir__call_fold *f) {
    json_decref(f->wanted);
    json_decref(f->pending);
    json_decref(f->offered);
    json_decref(f->called);
    memset(f, 0, sizeof *f);
}

/* Remove the first [id, ...] entry of `list` whose id is `id`; whether one was. */
static bool take(json_t *list, const char *id) {
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) {
        if (strcmp(json_string_value(json_array_get(x, 0)), id) == 0) {
            json_array_remove(list, i);
            return true;
        }
    }
    return false;
}

/* Record `id` at `seq` in `ids`, and with `what` (borrowed) in `list` (may
 * be NULL).  False when `ids` already held it (nothing is recorded); sets
 * *oom when out of memory. */
static bool record(json_t *ids, json_t *list, const char *id, size_t seq, const json_t *what,
                   bool *oom) {
    if (json_object_get(ids, id))
        return false;
    if (json_object_set_new(ids, id, json_integer((json_int_t)seq)) != 0 ||
        (list && json_array_append_new(list, json_pack("[s,I,O]", id, (json_int_t)seq,
                                                       (json_t *)(uintptr_t)what)) != 0))
        *oom = true;
    return true;
}

int weir__call_fold_event(weir__call_fold *f, size_t seq, const json_t *ev,
                          weir__call_fold_report_fn report, void *ud) {
    const char *type = weir__json_str(ev, "type", "");
    const json_t *d = json_object_get(ev, "data");
    bool oom = false;
    if (strcmp(type, "assistant/message") == 0) {
        size_t k;
        const json_t *b;
        json_array_foreach(json_object_get(json_object_get(d, "message"), "content"), k, b) {
            const char *id = weir__json_str(b, "id", NULL);
            if (strcmp(weir__json_str(b, "type", ""), "tool_call") != 0 || !id)
                continue;
            /* wanted unless a tool/call came first */
            json_t *list = json_object_get(f->called, id) ? NULL : f->wanted;
            if (!record(f->offered, list, id, seq, b, &oom) && report)
                report(ud, seq, WEIR__FOLD_REOFFERED, id);
        }
    } else if (strcmp(type, "tool/call") == 0) {
        const char *id = weir__json_str(d, "call_id", "");
        take(f->wanted, id);
        if (!record(f->called, f->pending, id, seq, ev, &oom) && report)
            report(ud, seq, WEIR__FOLD_REDISPATCHED, id);
    } else if (strcmp(type, "tool/result") == 0) {
        const char *id = weir__log_result_call_id(ev);
        if (id && !take(f->pending, id) && report)
            report(ud, seq, WEIR__FOLD_UNMATCHED, id);
    }
    return oom ? WEIR_E_NOMEM : WEIR_OK;
}
