/*
 * core/api/turn_outcome.c - weir_agent_last_turn(): how the last ended turn of a
 * session ended, read from its log (the last turn/end, and that turn's last
 * assistant/message for the final text).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

void weir_turn_outcome_clear(weir_turn_outcome *out) {
    if (!out)
        return;
    weir__free(out->text);
    json_decref(out->reason);
    uint32_t size = out->struct_size;
    *out = (weir_turn_outcome)WEIR_TURN_OUTCOME_INIT;
    out->struct_size = size;
}

/* The text blocks of an assistant/message event, joined (malloc'd), or NULL. */
static char *message_text(const json_t *event) {
    const json_t *content = json_object_get(
        json_object_get(json_object_get(event, "data"), "message"), "content");
    size_t len = 1, i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "text") == 0)
            len += strlen(weir__json_str(b, "text", ""));
    }
    char *text = weir__malloc(len);
    if (!text)
        return NULL;
    text[0] = '\0';
    json_array_foreach(content, i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "text") == 0)
            strcat(text, weir__json_str(b, "text", ""));
    }
    return text;
}

static void copy_str(char *dst, size_t size, const char *src) {
    snprintf(dst, size, "%s", src ? src : "");
}

int weir_agent_last_turn(weir_agent *a, weir_turn_outcome *out, weir_error *err) {
    if (!a || !out || out->struct_size < sizeof *out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_agent_last_turn: needs an agent and an outcome whose struct_size "
                         "is sizeof(weir_turn_outcome)");
    weir_turn_outcome_clear(out);
    /* any thread: each envelope is a reference of its own (a turn end's
     * trim may release the log's) */
    size_t n = weir__log_count(a->e.log);
    json_t *end = NULL;
    size_t at = n;
    bool oom = false;
    while (!oom && at-- > 0) {
        json_t *ev = weir__log_event_ref(a->e.log, at);
        oom = !ev;
        if (strcmp(weir__json_str(ev, "type", ""), "turn/end") == 0) {
            end = ev;
            break;
        }
        json_decref(ev);
    }
    if (oom)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_agent_last_turn: out of memory");
    if (!end)
        return WEIR_OK;
    const json_t *data = json_object_get(end, "data");
    int turn = (int)weir__json_int(data, "turn", 0);
    json_t *last = NULL;
    for (size_t i = at; i-- > 0 && !last && !oom;) {
        json_t *ev = weir__log_event_ref(a->e.log, i);
        oom = !ev;
        const char *type = weir__json_str(ev, "type", "");
        const json_t *d = json_object_get(ev, "data");
        bool start = strcmp(type, "turn/start") == 0 && weir__json_int(d, "turn", -1) == turn;
        if (!start && strcmp(type, "assistant/message") == 0 &&
            weir__json_int(d, "turn", -1) == turn)
            last = json_incref(ev);
        json_decref(ev);
        if (start)
            break;
    }
    const json_t *reason = json_object_get(data, "reason");
    char *text = last ? message_text(last) : weir__strdup("");
    json_decref(last);
    json_t *copy = json_deep_copy(reason);
    if (!text || !copy || oom) {
        weir__free(text);
        json_decref(copy);
        json_decref(end);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_agent_last_turn: out of memory");
    }
    out->turn = turn;
    copy_str(out->kind, sizeof out->kind, weir__json_str(reason, "kind", ""));
    const json_t *error = json_object_get(reason, "error");
    copy_str(out->failure_code, sizeof out->failure_code, weir__json_str(error, "code", ""));
    copy_str(out->failure_message, sizeof out->failure_message,
             weir__json_str(error, "message", ""));
    out->text = text;
    out->reason = copy;
    json_decref(end);
    return WEIR_OK;
}
