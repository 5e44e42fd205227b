/*
 * cli/usage.c - token usage and cost as the CLI shows them: summed from
 * the usage and cost that assistant/message and assistant/attempt events
 * carry (docs/session-log.md), printed as one line:
 *   in 12,345 · cached 10,000 · written 2,000 · out 456 · $0.0123
 * The cost is shown only when every event that reported usage also carried
 * a cost (a price was known for each): never a partial, wrong sum.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* A non-negative integer member of `o`, or 0. */
static long long count(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (long long)json_integer_value(v)
                                                           : 0;
}

void weir_cli_usage_add(weir_cli_usage *u, const json_t *data) {
    const json_t *usage = json_object_get(data, "usage");
    if (!json_is_object(usage))
        return;
    u->any = true;
    u->in += count(usage, "input_tokens");
    u->cached += count(usage, "cache_read_tokens");
    long long written = count(usage, "cache_write_tokens");
    if (!written) /* only the per-TTL split was reported */
        written = count(usage, "cache_write_5m_tokens") + count(usage, "cache_write_1h_tokens");
    u->written += written;
    u->out += count(usage, "output_tokens");
    const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
    if (json_is_number(usd) && json_number_value(usd) >= 0)
        u->usd += json_number_value(usd);
    else
        u->unpriced = true;
}

void weir_cli_usage_sum(weir_cli_usage *into, const weir_cli_usage *u) {
    if (!u->any)
        return;
    into->any = true;
    into->in += u->in;
    into->cached += u->cached;
    into->written += u->written;
    into->out += u->out;
    into->usd += u->usd;
    into->unpriced = into->unpriced || u->unpriced;
}

const char *weir_cli_grouped(char *buf, size_t size, long long n) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", n < 0 ? 0 : n);
    size_t o = 0;
    for (int i = 0; i < len && o + 1 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < size)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

void weir_cli_usage_cost(char *buf, size_t size, double usd) {
    /* cents for dollars, four places below a dollar, more below a cent of a cent */
    snprintf(buf, size, usd >= 1 ? "$%.2f" : usd >= 0.0001 || usd == 0 ? "$%.4f" : "$%.6f", usd);
}

const char *weir_cli_usage_line(char *buf, size_t size, const weir_cli_usage *u) {
    char in[32], cached[32], written[32], out[32], cost[32] = "";
    if (u->any && !u->unpriced) {
        char c[24];
        weir_cli_usage_cost(c, sizeof c, u->usd);
        snprintf(cost, sizeof cost, " \xc2\xb7 %s", c);
    }
    snprintf(buf, size,
             "in %s \xc2\xb7 cached %s \xc2\xb7 written %s \xc2\xb7 out %s%s",
             weir_cli_grouped(in, sizeof in, u->in), weir_cli_grouped(cached, sizeof cached, u->cached),
             weir_cli_grouped(written, sizeof written, u->written), weir_cli_grouped(out, sizeof out, u->out),
             cost);
    return buf;
}
