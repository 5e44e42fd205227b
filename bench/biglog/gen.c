/* bench_biglog_gen: writes a valid weir session log of many turns, streamed
 * (constant memory, so it writes a gigabyte as fast as the disk takes it).
 *
 *   bench_biglog_gen -o FILE [--turns N] [--tool-bytes B] [--compact-every K]
 *                    [--size BYTES] [--session ID]
 *
 * The events are the ones `weir run` writes with the built-in deployment
 * (provider-scripted builtin:demo, system-prompt, the pow tool of tools-ffi,
 * compaction-basic), copied from a real log and renumbered: one long-lived
 * process (one request/header, one request/context), each turn a user
 * message, an assistant message calling pow, its tool result (B bytes of
 * text instead of the number) and the final answer. With --compact-every K,
 * every K-th turn starts with a pressure compaction exactly as
 * compaction-basic logs it (compaction/start, compaction/summary, the
 * user/message replace of everything between the system message and the
 * last turn, compaction/end). --size stops after the turn that reaches
 * BYTES; with neither --turns nor --size it writes 1 turn.
 *
 * Prints one key=value line on stderr: bytes, events, turns, compactions and
 * surface_bytes (the JSON bytes of the messages the log derives to, the
 * "resumed surface").
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static uint64_t seq, now = 1700000000000ULL, bytes_out;
static const char *session = "biglog";

#define SYSTEM_TEXT "You are a careful assistant."
#define INTRO_TEXT "Let me work that out with the pow tool."
#define TOOLS_JSON                                                                                 \
    "[{\"name\":\"pow\",\"description\":\"x raised to the power y\",\"parameters\":{\"type\":"     \
    "\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},"         \
    "\"required\":[\"x\",\"y\"],\"additionalProperties\":false}}]"

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(out, fmt, ap);
    va_end(ap);
    if (n < 0)
        die("write");
    bytes_out += (uint64_t)n;
}

/* Starts an event line: the envelope up to and including `"data":`. */
static void head(const char *type) {
    now++;
    emit("{\"seq\":%" PRIu64 ",\"time\":%" PRIu64 ",\"type\":\"%s\",\"data\":", seq++, now, type);
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A text-chunks record of TEXT (plain ASCII, nothing to escape) in 4 deltas. */
static void text_chunks(int index, const char *text) {
    size_t n = strlen(text), cut[5] = {0, n / 4, n / 2, 3 * n / 4, n};
    emit("{\"type\":\"text-chunks\",\"index\":%d,\"time0\":%" PRIu64 ",\"dt\":[0,0,0,0],\"texts\":[",
         index, now);
    for (int i = 0; i < 4; i++)
        emit("%s\"%.*s\"", i ? "," : "", (int)(cut[i + 1] - cut[i]), text + cut[i]);
    emit("]}");
}

static void chunk(const char *body) {
    emit("{\"type\":\"chunk\",\"time\":%" PRIu64 ",\"chunk\":%s}", now, body);
}

/* The first answer of a turn: text and a pow call. Returns the message's
 * JSON size (what it adds to the surface). */
static size_t assistant_call(int turn, int x, int y, int input_tokens) {
    char args[64], msg[512];
    snprintf(args, sizeof args, "{\\\"x\\\":%d,\\\"y\\\":%d}", x, y);
    int mn = snprintf(msg, sizeof msg,
                      "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"" INTRO_TEXT
                      "\"},{\"type\":\"tool_call\",\"id\":\"call_pow_1\",\"name\":\"pow\","
                      "\"arguments\":\"%s\"}]}",
                      args);
    head("assistant/message");
    emit("{\"turn\":%d,\"step\":1,\"message\":%s,\"stream\":[", turn, msg);
    chunk("{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"}");
    emit(",");
    text_chunks(0, INTRO_TEXT);
    emit(",");
    chunk("{\"type\":\"block-end\",\"index\":0}");
    emit(",");
    chunk("{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\"}");
    emit(",{\"type\":\"tool-call-chunks\",\"index\":1,\"time0\":%" PRIu64
         ",\"dt\":[0,0],\"id\":\"call_pow_1\",\"name\":\"pow\",\"args\":[\"{\\\"x\\\":%d\","
         "\",\\\"y\\\":%d}\"]},",
         now, x, y);
    chunk("{\"type\":\"block-end\",\"index\":1}");
    char usage[128];
    snprintf(usage, sizeof usage, "{\"input_tokens\":%d,\"output_tokens\":17}", input_tokens);
    char body[192];
    snprintf(body, sizeof body, "{\"type\":\"usage\",\"usage\":%s}", usage);
    emit(",");
    chunk(body);
    emit(",");
    chunk("{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}");
    emit("],\"usage\":%s,\"provider\":\"scripted\",\"model\":\"demo\"},\"surface_op\":\"append\"}\n",
         usage);
    return (size_t)mn;
}

static size_t assistant_final(int turn, const char *text, int input_tokens) {
    char msg[512];
    int mn = snprintf(msg, sizeof msg,
                      "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"%s\"}]}",
                      text);
    head("assistant/message");
    emit("{\"turn\":%d,\"step\":2,\"message\":%s,\"stream\":[", turn, msg);
    chunk("{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"}");
    emit(",");
    text_chunks(0, text);
    emit(",");
    chunk("{\"type\":\"block-end\",\"index\":0}");
    char usage[128], body[192];
    snprintf(usage, sizeof usage, "{\"input_tokens\":%d,\"output_tokens\":6}", input_tokens);
    snprintf(body, sizeof body, "{\"type\":\"usage\",\"usage\":%s}", usage);
    emit(",");
    chunk(body);
    emit(",");
    chunk("{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}");
    emit("],\"usage\":%s,\"provider\":\"scripted\",\"model\":\"demo\"},\"surface_op\":\"append\"}\n",
         usage);
    return (size_t)mn;
}

/* Surface node seqs since the system message, in surface order: what the
 * next compaction shadows (the previous summary, then whole turns). */
static uint64_t *nodes;
static size_t n_nodes, cap_nodes;
/* What a log/checkpoint says besides the counts (docs/session-log.md,
 * "Resume from a checkpoint"): each node's ordinal among the surface events
 * (ords[i] is nodes[i]'s), the system message's, and the kept events: the
 * request header and context and the last 32 user/message events. */
static uint64_t *ords, applied, sys_seq, header_seq = UINT64_MAX, context_seq = UINT64_MAX;
static uint64_t users[32];
static size_t n_users;

static void user_event(uint64_t s) { users[n_users++ % 32] = s; }

static void node(uint64_t s) {
    if (n_nodes == cap_nodes) {
        cap_nodes = cap_nodes ? 2 * cap_nodes : 1024;
        nodes = realloc(nodes, cap_nodes * sizeof *nodes);
        ords = realloc(ords, cap_nodes * sizeof *ords);
        if (!nodes || !ords)
            die("realloc");
    }
    ords[n_nodes] = applied++;
    nodes[n_nodes++] = s;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The checkpoint's "at", "last_turn", "surface" and "keep" members: the
 * surface as runs of nodes whose ordinals follow each other. */
static void checkpoint_folds(uint64_t at, int turn) {
    emit(",\"at\":%" PRIu64 ",\"last_turn\":%d,\"surface\":{\"applied\":%" PRIu64
         ",\"runs\":[[%" PRIu64,
         at, turn, applied, sys_seq);
    uint64_t last_seq = sys_seq, last_ord = 0, first_ord = 0; /* the system message: ordinal 0 */
    for (size_t i = 0; i < n_nodes; i++) {
        if (ords[i] != last_ord + 1) {
            emit(",%" PRIu64 ",%" PRIu64 "],[%" PRIu64, last_seq, first_ord, nodes[i]);
            first_ord = ords[i];
        }
        last_seq = nodes[i];
        last_ord = ords[i];
    }
    emit(",%" PRIu64 ",%" PRIu64 "]]},\"keep\":[", last_seq, first_ord);
    uint64_t keep[34];
    size_t n = 0, have = n_users < 32 ? n_users : 32;
    for (size_t i = 0; i < have; i++)
        keep[n++] = users[i];
    if (header_seq != UINT64_MAX)
        keep[n++] = header_seq;
    if (context_seq != UINT64_MAX)
        keep[n++] = context_seq;
    qsort(keep, n, sizeof *keep, cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || keep[i] != keep[i - 1])
            emit("%s%" PRIu64, i ? "," : "", keep[i]);
    emit("]");
}

#define SUMMARY_TEXT                                                                               \
    "This checkpoint replaces the earlier turns of the conversation.\\n\\n<compacted-summary>\\n"  \
    "The user asked for powers of small integers, one a turn; each was worked out with the pow "   \
    "tool and answered in one sentence. Nothing is pending.\\n</compacted-summary>"

/* A pressure compaction at the start of TURN: shadows every node but the
 * last KEEP (the last turn) and puts the summary in their place. Returns the
 * summary message's JSON size. */
static size_t compaction(int turn, size_t keep, uint64_t shadowed_bytes) {
    size_t n = n_nodes - keep;
    uint64_t id = mix(seq * 31 + (uint64_t)turn);
    int tokens = (int)(shadowed_bytes / 4) + 200, shadowed = (int)(shadowed_bytes / 4);
    int summary_tokens = (int)(sizeof SUMMARY_TEXT / 4);
    head("compaction/start");
    emit("{\"compaction_id\":\"cmp-%016" PRIx64 "\",\"trigger\":\"pressure\",\"turn\":%d,\"step\":1,"
         "\"tokens\":%d,\"context_window\":32768,\"threshold\":26214},\"ignorable\":true}\n",
         id, turn, tokens);
    uint64_t summary_seq = seq;
    head("compaction/summary");
    emit("{\"compaction_id\":\"cmp-%016" PRIx64 "\",\"turn\":%d,\"step\":1,\"shadowed_range\":"
         "{\"start\":%" PRIu64 ",\"end\":%" PRIu64 "},\"shadowed_seqs\":[",
         id, turn, nodes[0], nodes[n - 1]);
    for (size_t i = 0; i < n; i++)
        emit("%s%" PRIu64, i ? "," : "", nodes[i]);
    emit("],\"shadowed_tokens\":%d,\"summary_tokens\":%d,\"provider\":\"scripted\","
         "\"model\":\"demo\",\"replay\":\"full\",\"summary\":\"" SUMMARY_TEXT "\",\"usage\":"
         "{\"input_tokens\":%d,\"output_tokens\":44}},\"ignorable\":true}\n",
         shadowed, summary_tokens, tokens);
    char msg[1024];
    int mn = snprintf(msg, sizeof msg,
                      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"" SUMMARY_TEXT
                      "\"}],\"source\":{\"kind\":\"compaction\",\"compaction_id\":\"cmp-%016" PRIx64
                      "\"}}",
                      id);
    uint64_t replace_seq = seq;
    uint64_t replace_ord = applied++;
    user_event(replace_seq);
    head("user/message");
    emit("{\"turn\":%d,\"step\":1,\"message\":%s},\"surface_op\":{\"op\":\"replace\",\"start_seq\":"
         "%" PRIu64 ",\"end_seq\":%" PRIu64 "},\"source_seqs\":[%" PRIu64,
         turn, msg, nodes[0], nodes[n - 1], summary_seq);
    for (size_t i = 0; i < n; i++)
        emit(",%" PRIu64, nodes[i]);
    emit("]}\n");
    head("compaction/end");
    emit("{\"compaction_id\":\"cmp-%016" PRIx64 "\",\"turn\":%d,\"step\":1,\"ok\":true,\"pruned\":0,"
         "\"summaries\":1,\"tokens_before\":%d,\"tokens_after\":%d,\"shadowed_tokens\":%d,"
         "\"saved_tokens\":%d,\"usage\":{\"input_tokens\":%d,\"output_tokens\":44}},"
         "\"ignorable\":true}\n",
         id, turn, tokens, tokens - shadowed + summary_tokens, shadowed, shadowed - summary_tokens,
         tokens);
    /* the summary takes the range's place, in front of the kept tail */
    nodes[0] = replace_seq;
    ords[0] = replace_ord;
    memmove(nodes + 1, nodes + n, keep * sizeof *nodes);
    memmove(ords + 1, ords + n, keep * sizeof *ords);
    n_nodes = 1 + keep;
    return (size_t)mn;
}

static void usage_exit(void) {
    fprintf(stderr, "usage: bench_biglog_gen -o FILE [--turns N] [--tool-bytes B] "
                    "[--compact-every K] [--size BYTES] [--session ID] [--checkpoint-bytes B]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long long turns = 0, tool_bytes = 4, compact_every = 0, size = 0;
    long long checkpoint_bytes = 4LL << 20; /* as the log writes them (session.checkpoint_bytes) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage_exit();
        const char *v = argv[++i];
        if (strcmp(a, "-o") == 0)
            path = v;
        else if (strcmp(a, "--session") == 0)
            session = v;
        else if (strcmp(a, "--turns") == 0)
            turns = atoll(v);
        else if (strcmp(a, "--tool-bytes") == 0)
            tool_bytes = atoll(v);
        else if (strcmp(a, "--compact-every") == 0)
            compact_every = atoll(v);
        else if (strcmp(a, "--checkpoint-bytes") == 0)
            checkpoint_bytes = atoll(v); /* 0: none, as a log written before checkpoints */
        else if (strcmp(a, "--size") == 0)
            size = atoll(v);
        else
            usage_exit();
    }
    if (!path || turns < 0 || tool_bytes < 1 || compact_every < 0 || size < 0 ||
        (compact_every > 0 && compact_every < 3))
        usage_exit();
    if (turns == 0 && size == 0)
        turns = 1;
    out = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!out)
        die(path);
    static char buf[1 << 20];
    setvbuf(out, buf, _IOFBF, sizeof buf);

    /* the tool result's text: printable ASCII that needs no escaping */
    char *filler = malloc((size_t)tool_bytes + 1);
    if (!filler)
        die("malloc");
    static const char words[] = "the quick brown fox jumps over the lazy dog 0123456789 ";
    for (long long i = 0; i < tool_bytes; i++)
        filler[i] = words[i % (sizeof words - 1)];
    filler[tool_bytes] = '\0';

    size_t system_bytes =
        strlen("{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"" SYSTEM_TEXT
               "\"}]}");
    uint64_t surface = system_bytes, last_turn_bytes = 0, tail_bytes = 0;
    long long turn = 0, compactions = 0, checkpoints = 0;
    long long used_in = 0, used_out = 0; /* the usage the log adds up to (log/checkpoint) */
    uint64_t checkpoint_at = 0;
    int input_tokens = 46;
    while ((turns == 0 || turn < turns) && (size == 0 || bytes_out < (uint64_t)size)) {
        int t = (int)++turn;
        int x = 2 + t % 7, y = 2 + t % 11;
        uint64_t in_id = mix((uint64_t)t);
        char prompt[64];
        snprintf(prompt, sizeof prompt, "what is %d to the power %d?", x, y);
        head("agent/inbox/spliced");
        emit("{\"target\":\"next-turn\",\"start\":0,\"inserted\":[{\"role\":\"user\",\"content\":"
             "[{\"type\":\"text\",\"text\":\"%s\"}],\"source\":{\"kind\":\"human\"},"
             "\"id\":\"in-%016" PRIx64 "\"}]}}\n",
             prompt, in_id);
        head("turn/start");
        emit("{\"turn\":%d}}\n", t);
        head("agent/inbox/spliced");
        emit("{\"target\":\"next-turn\",\"start\":0,\"removed_count\":1,\"inserted\":[]}}\n");
        head("hook/decision");
        emit("{\"hook\":\"system-prompt/assemble\",\"plugin\":\"system-prompt@0.1.0\",\"row\":"
             "\"prompt\",\"decision\":\"rewrite\",\"turn\":%d,\"step\":1,\"latency_us\":8},"
             "\"ignorable\":true}\n",
             t);
        if (compact_every > 0 && t > 2 && (t - 1) % compact_every == 0) {
            /* keep the last turn (4 nodes), shadow the rest */
            uint64_t shadowed = surface - system_bytes - last_turn_bytes;
            size_t sb = compaction(t, 4, shadowed);
            surface = system_bytes + sb + last_turn_bytes;
            compactions++;
            input_tokens = (int)(surface / 4);
        }
        head("step/start");
        emit("{\"turn\":%d,\"step\":1}}\n", t);
        tail_bytes = 0;
        if (t == 1) {
            sys_seq = seq;
            applied++; /* ordinal 0 */
            head("system/message");
            emit("{\"turn\":1,\"step\":1,\"message\":{\"role\":\"system\",\"content\":[{\"type\":"
                 "\"text\",\"text\":\"" SYSTEM_TEXT "\"}]}},\"surface_op\":\"append\"}\n");
        }
        user_event(seq);
        node(seq);
        head("user/message");
        emit("{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\","
             "\"text\":\"%s\"}],\"source\":{\"kind\":\"human\"},\"id\":\"in-%016" PRIx64
             "\"}},\"surface_op\":\"append\"}\n",
             t, prompt, in_id);
        tail_bytes += 70 + strlen(prompt);
        if (t == 1) {
            header_seq = seq;
            context_seq = seq + 1;
            head("request/header");
            emit("{\"header\":{\"config\":{\"provider\":\"scripted\",\"model\":\"demo\","
                 "\"max_tokens\":4096},\"tools\":" TOOLS_JSON "},\"reason\":\"initial\"}}\n");
            head("request/context");
            emit("{\"provider\":\"scripted\",\"model\":\"demo\",\"context_window\":32768}}\n");
        }
        node(seq);
        tail_bytes += assistant_call(t, x, y, input_tokens);
        used_in += input_tokens;
        used_out += 17;
        uint64_t call_seq = seq;
        head("tool/call");
        emit("{\"turn\":%d,\"step\":1,\"call_id\":\"call_pow_1\",\"name\":\"pow\",\"arguments\":"
             "\"{\\\"x\\\":%d,\\\"y\\\":%d}\",\"idempotency_key\":\"%s:%d:1:call_pow_1\"}}\n",
             t, x, y, session, t);
        node(seq);
        head("tool/result");
        char rprefix[64];
        int rp = snprintf(rprefix, sizeof rprefix, "pow(%d, %d) for turn %d: ", x, y, t);
        emit("{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
             "\"tool_result\",\"call_id\":\"call_pow_1\",\"content\":[{\"type\":\"text\",\"text\":"
             "\"%s%s\"}]}]}},\"surface_op\":\"append\",\"source_seqs\":[%" PRIu64 "]}\n",
             t, rprefix, filler, call_seq);
        tail_bytes += 116 + (uint64_t)rp + (uint64_t)tool_bytes;
        head("step/end");
        emit("{\"turn\":%d,\"step\":1}}\n", t);
        head("step/start");
        emit("{\"turn\":%d,\"step\":2}}\n", t);
        char answer[96];
        snprintf(answer, sizeof answer, "%d to the power %d is a number I worked out.", x, y);
        node(seq);
        tail_bytes += assistant_final(t, answer, input_tokens + 60);
        used_in += input_tokens + 60;
        used_out += 6;
        head("step/end");
        emit("{\"turn\":%d,\"step\":2}}\n", t);
        head("turn/end");
        emit("{\"turn\":%d,\"reason\":{\"kind\":\"completed\"}}}\n", t);
        if (checkpoint_bytes > 0 && bytes_out - checkpoint_at >= (uint64_t)checkpoint_bytes) {
            /* what the log before it adds up to, as the log writes it */
            checkpoint_at = bytes_out;
            uint64_t events = seq;
            head("log/checkpoint");
            emit("{\"events\":%" PRIu64 ",\"turns\":%d,\"usage\":{\"input_tokens\":%lld,"
                 "\"cache_read_tokens\":0,\"cache_write_tokens\":0,\"output_tokens\":%lld}",
                 events, t, used_in, used_out);
            checkpoint_folds(checkpoint_at, t);
            emit("},\"ignorable\":true}\n");
            checkpoints++;
        }
        surface += tail_bytes;
        last_turn_bytes = tail_bytes;
        input_tokens += (int)(tail_bytes / 4);
    }
    if (fflush(out) != 0 || (out != stdout && fclose(out) != 0))
        die("write");
    fprintf(stderr,
            "gen file=%s bytes=%" PRIu64 " events=%" PRIu64 " turns=%lld compactions=%lld "
            "checkpoints=%lld tool_bytes=%lld surface_bytes=%" PRIu64 "\n",
            path, bytes_out, seq, turn, compactions, checkpoints, tool_bytes, surface);
    free(filler);
    free(nodes);
    return 0;
}
