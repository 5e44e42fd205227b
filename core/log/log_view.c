/*
 * core/log/log_view.c - a session log seen as a plugin sees it through its
 * agent (core/log/log_view.h): the surface nodes, the last envelope of a
 * type, the seqs a replacement shadows.
 */
#include <string.h>

#include "log_view.h"
#include "surface.h"

json_t *weir__log_surface_nodes(weir__log *log) {
    json_t *events = log ? weir__log_surface_events(log) : NULL;
    json_t *out = events ? json_array() : NULL;
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) {
        if (!out)
            break;
        json_t *msg = weir__derive_event_message(ev);
        json_t *node =
            json_pack("{s:I, s:s, s:o}", "seq", weir__json_int(ev, "seq", 0), "type",
                      weir__json_str(ev, "type", ""), "message", msg ? msg : json_null());
        if (json_array_append_new(out, node) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(events);
    return out;
}

json_t *weir__log_last_event(weir__log *log, const char *type) {
    if (!log || !type)
        return NULL;
    size_t at1 = weir__log_latest(log, type); /* a type the log's folds follow */
    if (at1 != SIZE_MAX) {
        json_t *ev = at1 ? weir__log_event_ref(log, at1 - 1) : NULL;
        json_t *copy = ev ? json_deep_copy(ev) : NULL;
        json_decref(ev);
        return copy;
    }
    for (size_t seq = weir__log_count(log); seq-- > 0;) {
        json_t *ev = weir__log_event_ref(log, seq); /* any thread: held while copied */
        if (!ev)
            return NULL; /* out of memory, not an older match */
        bool match = strcmp(weir__json_str(ev, "type", ""), type) == 0;
        json_t *copy = match ? json_deep_copy(ev) : NULL;
        json_decref(ev);
        if (match)
            return copy;
    }
    return NULL;
}

json_t *weir__log_shadowed_seqs(const weir__log *log, size_t start_seq, size_t end_seq) {
    const weir__surface *s = weir__log_surface(log);
    size_t n = weir__surface_len(s), from = n, to = n;
    for (size_t i = 0; i < n; i++) {
        if (weir__surface_node(s, i) == start_seq)
            from = i;
        if (weir__surface_node(s, i) == end_seq)
            to = i;
    }
    json_t *out = json_array();
    if (from == n || to == n || from > to) {
        if (json_array_append_new(out, json_integer((json_int_t)start_seq)) != 0 ||
            (end_seq != start_seq &&
             json_array_append_new(out, json_integer((json_int_t)end_seq)) != 0)) {
            json_decref(out);
            return NULL;
        }
        return out;
    }
    for (size_t i = from; out && i <= to; i++) {
        if (json_array_append_new(out, json_integer((json_int_t)weir__surface_node(s, i))) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}
