/*
 * plugins/system-prompt - adds system prompt sections on
 * `system-prompt/assemble`.
 *
 * Config: {"text"?: "...", "files"?: [paths], "order"?: N, "name"?: "..."}.
 * The text, then each file (read once, at init), become sections
 * {name, order, text} in that order; the core renders sections by ascending
 * order (ties keep their order) into the system message.  A missing or
 * unreadable file fails init, naming it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

static const char config_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\"},"
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"order\":{\"type\":\"integer\"},"
    "\"name\":{\"type\":\"string\"}},"
    "\"additionalProperties\":false}";

static int fail(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int fail(weir_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* The whole file as a new JSON string, or NULL (errno-style message in err). */
static json_t *read_file(const char *path, weir_error *err, int *rc) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *rc = fail(err, WEIR_E_PLUGIN_CONFIG, "cannot read system prompt file %s", path);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) {
        *rc = WEIR_E_NOMEM;
        return NULL;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--; /* a trailing newline is not part of the section */
    json_t *s = bad ? NULL : json_stringn(buf, len);
    free(buf);
    if (!s)
        *rc = fail(err, WEIR_E_PLUGIN_CONFIG,
                   bad ? "cannot read system prompt file %s"
                       : "system prompt file %s is not valid UTF-8 text",
                   path);
    return s;
}

/* Append our sections to the assembly the rest of the chain returned. */
static json_t *on_assemble(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    const json_t *sections = ud;
    json_t *res = weir_next(call);
    if (!res)
        return NULL;
    json_t *out = json_deep_copy(res);
    json_decref(res);
    json_t *list = json_object_get(out, "sections");
    if (!json_is_array(list)) {
        json_decref(out);
        weir_call_fail(call, "the assembly returned by the chain has no sections array");
        return NULL;
    }
    size_t i;
    const json_t *s;
    json_array_foreach(sections, i, s) {
        if (json_array_append_new(list, json_deep_copy(s)) != 0) {
            json_decref(out);
            weir_call_fail(call, "out of memory");
            return NULL;
        }
    }
    return out;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    const char *name = json_string_value(json_object_get(config, "name"));
    if (!name)
        name = weir_plugin_id(self);
    const json_t *order = json_object_get(config, "order");
    json_int_t ord = json_is_integer(order) ? json_integer_value(order) : 0;
    const json_t *text = json_object_get(config, "text");
    const json_t *files = json_object_get(config, "files");
    if (text && !json_is_string(text))
        return fail(err, WEIR_E_PLUGIN_CONFIG, "text: expected a string");
    if (files && !json_is_array(files))
        return fail(err, WEIR_E_PLUGIN_CONFIG, "files: expected an array of paths");
    json_t *sections = json_array();
    if (!sections)
        return WEIR_E_NOMEM;
    int rc = WEIR_OK;
    if (text && json_array_append_new(sections, json_pack("{s:s, s:I, s:O}", "name", name,
                                                          "order", ord, "text", text)) != 0)
        rc = WEIR_E_NOMEM;
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f) {
        if (rc != WEIR_OK)
            break;
        const char *path = json_string_value(f);
        if (!path) {
            rc = fail(err, WEIR_E_PLUGIN_CONFIG, "files[%zu]: expected a path", i);
            break;
        }
        json_t *body = read_file(path, err, &rc);
        if (!body)
            break;
        if (json_array_append_new(sections, json_pack("{s:s, s:I, s:o}", "name", name, "order",
                                                      ord, "text", body)) != 0)
            rc = WEIR_E_NOMEM;
    }
    if (rc == WEIR_OK) {
        weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
        opts.user_data = sections;
        rc = weir_hook_register(self, "system-prompt/assemble", on_assemble, &opts);
    }
    if (rc != WEIR_OK) {
        json_decref(sections);
        return rc;
    }
    weir_plugin_set_data(self, sections);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { json_decref(weir_plugin_data(self)); }

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    "system-prompt",
    "0.1.0",
    "System prompt sections from config text and files",
    config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
