/*
 * plugins/provider-scripted/demo.c - the built-in demo ("script":
 * "builtin:demo"): each reply is made from the request, so the default
 * deployment answers what it is asked in a way one recognises.
 *
 *   a power ("2 to the power 10", "2 to the 10th", "2^10", "2**10",
 *   "pow(2, 10)") with a pow tool in the request
 *           "Let me work that out with the pow tool." and a pow call
 *           {x, y} ("Hello! " first when the prompt says hello);
 *   the pow tool's result     "2 to the power 10 is 1024.";
 *   a summary request (tool_choice "none", as compaction-basic sends)
 *           one short line;
 *   anything else             the prompt quoted back, cut short, and a
 *                             line on what the demo can do.
 */
#define _GNU_SOURCE /* strcasestr */
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "demo.h"

#define QUOTE_CHARS 60 /* the quoted prompt, at most */

/* The text blocks of a message, joined (malloc'd; "" when none). */
static char *message_text(const json_t *message) {
    const json_t *content = json_object_get(message, "content");
    if (json_is_string(content))
        return strdup(json_string_value(content));
    size_t len = 0, i;
    const json_t *b;
    json_array_foreach(content, i, b) len += json_string_length(json_object_get(b, "text")) + 1;
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    out[0] = '\0';
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t) {
            if (out[0])
                strcat(out, " ");
            strcat(out, t);
        }
    }
    return out;
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A number at p ("-2", "1.5"); the end in *end, or false. */
static bool number(const char *p, double *v, const char **end) {
    const char *q = p;
    if (*q == '-' || *q == '+')
        q++;
    if (!isdigit((unsigned char)*q))
        return false;
    char *e;
    *v = strtod(p, &e);
    if (e == p)
        return false;
    if (e > p && e[-1] == '.') /* "10." ends a sentence */
        e--;
    *end = e;
    return true;
}

/* `word` (any case) at p, then spaces; the end, or NULL. */
static const char *word(const char *p, const char *w) {
    size_t n = strlen(w);
    if (strncasecmp(p, w, n) != 0)
        return NULL;
    return skip_space(p + n);
}

/* The exponent after a base: "^10", "**10", "to the power (of) 10",
 * "to the 10th", "raised to (the power of) 10". */
static bool exponent(const char *p, double *y) {
    const char *q, *e;
    p = skip_space(p);
    if (*p == '^' || (p[0] == '*' && p[1] == '*'))
        return number(skip_space(p + (*p == '^' ? 1 : 2)), y, &e);
    if ((q = word(p, "raised to")) != NULL || (q = word(p, "to")) != NULL) {
        const char *r = word(q, "the");
        if (r) {
            const char *s = word(r, "power");
            if (s) {
                const char *t = word(s, "of");
                return number(t ? t : s, y, &e);
            }
            if (number(r, y, &e))
                return word(e, "th") || word(e, "st") || word(e, "nd") || word(e, "rd");
            return false;
        }
        return number(q, y, &e); /* "raised to 10" */
    }
    return false;
}

/* Whether `text` asks for a power: its base and exponent. */
static bool find_power(const char *text, double *x, double *y) {
    for (const char *p = text; *p; p++) {
        const char *q = strncasecmp(p, "pow(", 4) == 0 ? p + 4 : NULL, *e;
        if (q && number(skip_space(q), x, &e)) { /* pow(2, 10) */
            e = skip_space(e);
            if (*e == ',' && number(skip_space(e + 1), y, &e))
                return true;
        }
        bool starts = isdigit((unsigned char)*p) &&
                      (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '.'));
        if (starts && number(p, x, &e) && exponent(e, y))
            return true;
    }
    return false;
}

static json_t *number_json(double v) {
    if (v == floor(v) && fabs(v) < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* "2", "1.5" */
static void number_text(const json_t *v, char *out, size_t size) {
    if (json_is_integer(v))
        snprintf(out, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_number(v))
        snprintf(out, size, "%g", json_number_value(v));
    else
        snprintf(out, size, "?");
}

static bool has_tool(const json_t *request, const char *name) {
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(request, "tools"), i, t) {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && !strcmp(n, name))
            return true;
    }
    return false;
}

static json_t *text_reply(const char *text) {
    return json_pack("{s:s, s:i}", "text", text, "chunks", 4);
}

/* After the pow tool's result: "2 to the power 10 is 1024." */
static json_t *result_reply(const json_t *msgs, size_t n) {
    const json_t *tool = json_array_get(msgs, n - 1);
    const json_t *block = json_array_get(json_object_get(tool, "content"), 0);
    char *result = message_text(block);
    const json_t *args = NULL;
    for (size_t i = n - 1; i-- > 0 && !args;) { /* the assistant message that called */
        const json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        size_t j;
        const json_t *b;
        json_array_foreach(json_object_get(m, "content"), j, b) {
            const char *name = json_string_value(json_object_get(b, "name"));
            if (role && !strcmp(role, "assistant") && name && !strcmp(name, "pow"))
                args = json_object_get(b, "arguments");
        }
    }
    json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL)
                                          : json_incref((json_t *)(uintptr_t)args);
    char x[64], y[64], line[512];
    number_text(json_object_get(parsed, "x"), x, sizeof x);
    number_text(json_object_get(parsed, "y"), y, sizeof y);
    if (json_is_true(json_object_get(block, "is_error")))
        snprintf(line, sizeof line, "The pow tool failed: %s", result ? result : "");
    else
        snprintf(line, sizeof line, "%s to the power %s is %s.", x, y, result ? result : "?");
    json_decref(parsed);
    free(result);
    return text_reply(line);
}

/* The prompt quoted back, cut to QUOTE_CHARS characters (whitespace runs as one space). */
static json_t *echo_reply(const char *prompt) {
    char quote[QUOTE_CHARS * 4 + 8];
    size_t len = 0, chars = 0;
    bool space = false;
    for (const char *p = prompt; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isspace(c)) {
            space = len > 0;
            continue;
        }
        bool lead = (c & 0xC0) != 0x80;
        if (lead && chars + space >= QUOTE_CHARS) {
            len += (size_t)sprintf(quote + len, "\xe2\x80\xa6");
            break;
        }
        if (space) {
            quote[len++] = ' ';
            chars++;
            space = false;
        }
        quote[len++] = (char)c;
        chars += lead;
    }
    quote[len] = '\0';
    char line[sizeof quote + 256];
    snprintf(line, sizeof line,
             "You said: \"%s\". I am the scripted demo: ask me for a power, such as "
             "\"2 to the power 10\", and I will use the pow tool.",
             quote);
    return text_reply(line);
}

json_t *scripted_demo_reply(const json_t *request) {
    const json_t *msgs = json_object_get(request, "messages");
    size_t n = json_array_size(msgs);
    const json_t *last = json_array_get(msgs, n ? n - 1 : 0);
    const char *role = json_string_value(json_object_get(last, "role"));
    const char *choice = json_string_value(json_object_get(request, "tool_choice"));
    if (choice && !strcmp(choice, "none")) /* a summary request (compaction) */
        return text_reply("Summary: an earlier conversation with the scripted demo.");
    if (role && !strcmp(role, "tool"))
        return result_reply(msgs, n);
    char *prompt = message_text(last);
    if (!prompt)
        return NULL;
    double x, y;
    json_t *reply;
    bool hello = strcasestr(prompt, "hello") != NULL;
    if (find_power(prompt, &x, &y) && has_tool(request, "pow")) {
        reply = json_pack("{s:s, s:i, s:[{s:s, s:s, s:{s:o, s:o}}]}", "text",
                          hello ? "Hello! Let me work that out with the pow tool."
                                : "Let me work that out with the pow tool.",
                          "chunks", 4, "tool_calls", "id", "call_pow_1", "name", "pow",
                          "arguments", "x", number_json(x), "y", number_json(y));
    } else if (find_power(prompt, &x, &y)) {
        reply = text_reply("That is a power, but this deployment gives me no pow tool.");
    } else {
        reply = echo_reply(prompt);
    }
    free(prompt);
    return reply;
}
