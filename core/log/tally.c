/*
 * core/log/tally.c - what a session log's events add up to (core/log/tally.h).
 */
#include <string.h>

#include "tally.h"

/* A non-negative integer member of `o`, or 0. */
static json_int_t count(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

void weir__tally_event(weir__tally *t, const json_t *ev) {
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *data = json_object_get(ev, "data");
    t->events++;
    const json_t *time = json_object_get(ev, "time");
    if (json_is_integer(time))
        t->last_time = json_integer_value(time);
    if (!type)
        return;
    if (!strcmp(type, "turn/start")) {
        t->turns++;
        t->open = true;
    } else if (!strcmp(type, "turn/end")) {
        t->open = false;
    } else if (!strcmp(type, "assistant/message") || !strcmp(type, "assistant/attempt")) {
        const json_t *usage = json_object_get(data, "usage");
        if (!json_is_object(usage))
            return;
        t->any = true;
        t->in += count(usage, "input_tokens");
        t->cached += count(usage, "cache_read_tokens");
        json_int_t written = count(usage, "cache_write_tokens");
        if (!written) /* only the per-TTL split was reported */
            written = count(usage, "cache_write_5m_tokens") + count(usage, "cache_write_1h_tokens");
        t->written += written;
        t->out += count(usage, "output_tokens");
        const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
        if (json_is_number(usd) && json_number_value(usd) >= 0)
            t->usd += json_number_value(usd);
        else
            t->unpriced = true;
    }
}

json_t *weir__tally_json(const weir__tally *t) {
    json_t *o = json_pack("{s:I, s:I}", "events", t->events, "turns", t->turns);
    if (o && t->any &&
        json_object_set_new(o, "usage",
                            json_pack("{s:I, s:I, s:I, s:I}", "input_tokens", t->in,
                                      "cache_read_tokens", t->cached, "cache_write_tokens",
                                      t->written, "output_tokens", t->out)) != 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->any && !t->unpriced &&
        json_object_set_new(o, "cost", json_pack("{s:f}", "usd", t->usd)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool weir__tally_from(weir__tally *t, const json_t *data) {
    memset(t, 0, sizeof *t);
    const json_t *events = json_object_get(data, "events"), *turns = json_object_get(data, "turns");
    if (!json_is_integer(events) || !json_is_integer(turns) || json_integer_value(events) < 0 ||
        json_integer_value(turns) < 0)
        return false;
    t->events = json_integer_value(events);
    t->turns = json_integer_value(turns);
    const json_t *usage = json_object_get(data, "usage");
    if (usage) {
        if (!json_is_object(usage))
            return false;
        t->any = true;
        t->in = count(usage, "input_tokens");
        t->cached = count(usage, "cache_read_tokens");
        t->written = count(usage, "cache_write_tokens");
        t->out = count(usage, "output_tokens");
        const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
        if (json_is_number(usd) && json_number_value(usd) >= 0)
            t->usd = json_number_value(usd);
        else
            t->unpriced = true;
    }
    return true;
}
