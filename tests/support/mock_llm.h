/*
 * tests/support/mock_llm.h - a loopback mock LLM server for tests and
 * benches.  Pure C sockets, HTTP/1.1 keep-alive, binds 127.0.0.1 only.
 *
 * Endpoints (the path decides the wire format; anything else gets a 404):
 *   POST /v1/chat/completions  OpenAI Chat Completions streaming SSE
 *   POST /v1/messages          Anthropic Messages streaming SSE
 *   GET  /v1/models            the script's "models" (vLLM reports max_model_len
 *                              here), 404 without it
 *   GET  /props                the script's "props" (llama.cpp reports n_ctx
 *                              here), 404 without it
 * The two GETs use no script entry; like every request they are recorded
 * and counted (mock_llm_requests, mock_llm_responses).
 *
 * Requests are answered in arrival order from a script: request i (0-based,
 * counted over all connections) gets script entry i.  When the script runs
 * out the server answers 500 {"error":{"message":"mock_llm: no scripted
 * response for request N",...}} unless the script sets "loop": true, which
 * starts again at entry 0.
 *
 * Script format (JSON; every key optional):
 *   {"loop": false,
 *    "models": [{"id": "m", "object": "model", "max_model_len": 8192}],
 *                                        GET /v1/models answers {"object":
 *                                        "list","data":<this>}; a string is
 *                                        sent verbatim (invalid JSON too)
 *    "props": {"default_generation_settings": {"n_ctx": 4096}},
 *                                        GET /props answers it; a string is
 *                                        sent verbatim
 *    "info_delay_ms": 0,                 wait before answering either GET
 *                                        (a stalled server; ends early when
 *                                        the server stops)
 *    "cache_accounting": false,          usage computed from the prompt and
 *                                        prompt caching (below) for every
 *                                        model, not only the vendors' names
 *    "compact_fail": 1,                  POST /v1/responses/compact (OpenAI's
 *                                        server compaction: answered outside
 *                                        the sequence, not streamed, with the
 *                                        user messages of the input and one
 *                                        compaction item whose
 *                                        encrypted_content later requests
 *                                        must send back unchanged) answers
 *                                        500 server_error this many times
 *                                        first (default 0)
 *    "aside": {"body_contains": "...", "reply": {"text": "..."}},
 *                                        every request whose body contains
 *                                        the string is answered with the
 *                                        reply (an entry, keys as below)
 *                                        without taking a place in
 *                                        "requests" (compaction's summary
 *                                        requests, matched by their
 *                                        instruction)
 *    "requests": [
 *      {"text": "Hello",                 assistant text (streamed in pieces)
 *       "reasoning": "thinking...",      OpenAI delta.reasoning_content /
 *                                        Anthropic thinking block (sent first)
 *       "tool_calls": [{"id":"call_1","name":"pow","arguments":"{\"x\":2}"}],
 *                                        `arguments` is JSON *text*, streamed
 *                                        in pieces (OpenAI function.arguments,
 *                                        Anthropic input_json_delta)
 *       "usage": {"input_tokens":10,"output_tokens":5},   default 10 / 5
 *       "finish": "stop"|"tool_calls"|"length",
 *                                        default tool_calls when there are
 *                                        tool calls, else stop.  Anthropic:
 *                                        end_turn / tool_use / max_tokens
 *       "chunk_size": 16,                max bytes per text/argument delta
 *                                        (cut on UTF-8 boundaries), default 16
 *       "chunk_delay_ms": 0,             sleep between SSE events
 *       "fault": "none",                 see below
 *       "retry_after": "2",              Retry-After header value for
 *                                        rate_limit/overloaded (default "1");
 *                                        "" sends no Retry-After
 *       "retry_after_ms": 1500,          also send retry-after-ms (>= 0)
 *       "status": 418, "body": "...",    for faults "http_error" and "raw"
 *       "headers": {"Content-Type": "text/html"},  for fault "raw"
 *       "body_hex": "1f8b08...",         for fault "raw": the body's bytes
 *       "pad_lines": 1, "pad_bytes": 2097152,  for fault "raw": filler
 *                                        header lines (X-Pad-<i>) of pad_bytes
 *                                        bytes each
 *       "expect": {"message_contains": "..."},
 *       "echo_key": false                the error text quotes the key the
 *                                        request sent (see below)
 *      }]}
 *
 * Faults:
 *   none          the normal stream
 *   rate_limit    429 + Retry-After, provider-shaped body (OpenAI
 *                 code rate_limit_exceeded / Anthropic rate_limit_error)
 *   server_error  500, provider-shaped body (Anthropic api_error)
 *   overloaded    Anthropic: 529 overloaded_error; OpenAI: 503 with
 *                 "The engine is currently overloaded" (+ Retry-After)
 *   auth          401 (OpenAI invalid_api_key / Anthropic authentication_error)
 *   overflow      400 with each provider's real context-overflow body:
 *                 OpenAI code context_length_exceeded "This model's maximum
 *                 context length is 128000 tokens...", Anthropic
 *                 invalid_request_error "prompt is too long: 210000 tokens
 *                 > 200000 maximum"
 *   http_error    `status` (default 500) with `body` verbatim (JSON type)
 *   raw           `status` (default 500) with only the script's `headers`
 *                 (no Content-Type unless given), the pad lines, the request
 *                 id and a Content-Length; the body is `body_hex` decoded,
 *                 else `body` verbatim: a captive portal's HTML, a gzip
 *                 body, SSE without a Content-Type, a giant header
 *   reset         200 headers + the first event, then a TCP RST
 *   stall         200 headers + the first event, then nothing until the
 *                 client closes the connection (or the server stops)
 *   keepalive     200 headers + the first event, then only SSE comments
 *                 (": keepalive") every chunk_delay_ms (default 50): an idle
 *                 timeout never fires.  Until the client closes, the server
 *                 stops, or 60 s passed (then the connection just closes)
 *   malformed     the stream with one data line of invalid JSON in the
 *                 middle (after the first text delta), then the rest
 *   truncated     the stream without its end: no finish_reason chunk, usage
 *                 or [DONE] (OpenAI); no message_delta/message_stop
 *                 (Anthropic).  The HTTP body itself ends cleanly.
 *   inband_error  200, the stream starts, then an in-band error: Anthropic
 *                 `event: error` data {"type":"error","error":{"type":
 *                 "overloaded_error","message":"Overloaded"}}; OpenAI
 *                 data {"error":{"message":"Overloaded","type":
 *                 "overloaded_error"}}; then the body ends
 *
 * echo_key: the faults auth, inband_error and malformed quote the request's
 * key (OpenAI: the Authorization value after "Bearer "; Anthropic: the
 * x-api-key value), as a careless server does: auth answers "Incorrect API
 * key provided: <key>. You can find ..." (OpenAI) / "invalid x-api-key:
 * <key>" (Anthropic), inband_error's message is "Overloaded (request key
 * <key>)", malformed's invalid line carries "key":"<key>".  For tests that
 * check the providers scrub secrets from what servers send back.
 *
 * expect.message_contains: the raw request body must contain the string;
 * otherwise the request is answered 400 {"error":{"message":"mock_llm
 * expect failed: ..."}} and counted by mock_llm_expect_failures().
 *
 * The vendors' rules (issue #32; each cited in mock_llm.c).  They apply only
 * to the model names they concern, so a test with any other model name sees
 * none of them.  A request that breaks one gets the vendor's 400 (counted by
 * mock_llm_rejections):
 *   claude-*  (POST /v1/messages)
 *     - thinking on: thinking.type "enabled" or "adaptive", or always for
 *       claude-fable-5* and claude-mythos-5*.  A thinking mode the model
 *       refuses ("enabled" on adaptive-only models: Opus 4.7, 4.8, Sonnet 5,
 *       Opus 5, Fable 5, Mythos 5; "adaptive" on extended-only ones: 3.7 to
 *       4.5; "disabled" on Fable/Mythos 5), budget_tokens < 1024 or >=
 *       max_tokens, temperature != 1 or top_k with thinking: 400.
 *     - with thinking on every reply starts with a thinking block (the
 *       entry's "reasoning", "" for an empty one, else a default text),
 *       signed for the request's prefix (model, tools, system, every
 *       message); every 5th such reply is a redacted_thinking block
 *       instead.  Thinking blocks sent back are checked: an unreadable
 *       signature or changed text is "Invalid `signature`", a changed
 *       prefix is "thinking block signature does not match the request
 *       prefix", another model's block is dropped silently (counted in
 *       the outcome's dropped_thinking).  The last assistant message, when
 *       it has tool_use, must start with thinking/redacted_thinking.
 *     - more than 4 cache_control blocks, or a 1h one after a 5m one: 400.
 *     - usage is computed (characters / 4 of the canonical prompt):
 *       input_tokens, cache_read_input_tokens, cache_creation_input_tokens
 *       and cache_creation.ephemeral_5m/1h_input_tokens, from cache entries
 *       per (model, prefix up to a breakpoint), the 20-block lookback and
 *       the model's minimum cacheable length.  The script's output_tokens
 *       stay.
 *   gpt-3.5*, gpt-4*, gpt-5*, o1*, o3*, o4*, chatgpt-*  (/v1/chat/completions)
 *     - max_tokens and temperature on reasoning models (see above).
 *     - automatic prefix caching: prompts of >= 1024 tokens, hits in 128-
 *       token steps of the longest prefix seen before (per model and
 *       prompt_cache_key); usage.prompt_tokens from the prompt and
 *       prompt_tokens_details.cached_tokens.
 *   deepseek-reasoner*, deepseek-v4*: thinking (unless thinking.type is
 *       "disabled") streams delta.reasoning_content first; an assistant
 *       message with tool_calls and no reasoning_content: 400.
 *   gemini-3*: the first tool call of a reply carries
 *       extra_content.google.thought_signature (bound to the prefix); an
 *       assistant message of the current turn (after the last user message)
 *       whose first tool call lacks it: 400 (Gemini's list-shaped body);
 *       one that does not match its prefix: 400 "Corrupted thought
 *       signature."
 * Every request's outcome is recorded (mock_llm_request_outcome) and, with
 * mock_llm_stats_file, written as one JSON line:
 *   {"request":i,"path":..,"model":..,"status":200,"usage":{"input_tokens":..,
 *    "output_tokens":..,"cache_read_tokens"?:..,"cache_write_5m_tokens"?:..,
 *    "cache_write_1h_tokens"?:..},"reply"?:"thinking"|"redacted_thinking",
 *    "dropped_thinking"?:n}  or  {...,"status":400,"error":"<message>"}.
 *
 * Responses carry `x-request-id: req_mock_<i>` (OpenAI) or
 * `request-id: req_mock_<i>` (Anthropic); ids are chatcmpl-mock-<i> /
 * msg_mock_<i>; `model` echoes the request's "model" (or "mock-model").
 * OpenAI streams end with a usage chunk (choices: []) and `data: [DONE]`.
 * Anthropic streams send a ping after message_start.
 *
 * Threading: one server thread accepts, one thread per connection serves.
 * Every accessor below is thread-safe.  The server never touches the
 * weir__ allocators or jansson after mock_llm_start* returns, so tests may
 * run allocation-failure loops while it serves.
 */
#ifndef WEIR_TESTS_MOCK_LLM_H
#define WEIR_TESTS_MOCK_LLM_H

#include <sys/types.h>

#include <jansson.h>
#include <stddef.h>

typedef struct mock_llm mock_llm;

/*
 * Start a server from script JSON text (see above) on 127.0.0.1, port 0
 * (the kernel picks; read it with mock_llm_port).  Returns 0 and *out (owned;
 * release with mock_llm_stop), or -1 with a reason on stderr (bad script,
 * socket error).
 */
int mock_llm_start(const char *script_json, mock_llm **out);
/* Same, reading the script from a file. */
int mock_llm_start_file(const char *path, mock_llm **out);
/*
 * The server in a forked child process, so that what it records does not
 * count in the caller's memory (the benches that measure RSS): the child
 * serves until *keep_fd (the write end of a pipe, the caller's) is closed,
 * then stops and exits; *child is its pid (reap it with waitpid).  The port,
 * or -1 (nothing to close or reap then).
 */
int mock_llm_fork(const char *script_json, pid_t *child, int *keep_fd);
/*
 * A deployment (new reference, NULL when out of memory) for the benches: a
 * provider-openai row (`plugin`: the .so's path) pointed at the mock on
 * `port`, model "bench" with a 10 M window, fsync none, sessions in
 * `session_dir`, no plugin path searched.
 */
json_t *mock_llm_openai_deployment(const char *plugin, int port, const char *session_dir);
/* The TCP port the server listens on. */
int mock_llm_port(mock_llm *m);
/*
 * A malloc'd base URL "http://127.0.0.1:<port>" (no trailing slash, no /v1);
 * free() it.  NULL on allocation failure.
 */
char *mock_llm_base_url(mock_llm *m);
/*
 * Stop the server: close the listener, wake and join every connection
 * thread (stalled ones included), free everything.  NULL is a no-op.
 */
void mock_llm_stop(mock_llm *m);

/* TCP connections accepted so far. */
long mock_llm_connections(mock_llm *m);
/* Requests received so far (complete request heads + bodies). */
long mock_llm_requests(mock_llm *m);
/* Responses fully sent (or ended by their fault) so far. */
long mock_llm_responses(mock_llm *m);
/* Requests whose `expect` did not hold. */
long mock_llm_expect_failures(mock_llm *m);
/* 400s answered because a request broke a vendor rule (see above). */
long mock_llm_rejections(mock_llm *m);
/* Cache read / written tokens summed over the replies with computed usage. */
long mock_llm_cache_read_tokens(mock_llm *m);
long mock_llm_cache_write_tokens(mock_llm *m);
/*
 * Append one JSON line per answered request to `path` (see above), flushed
 * at once.  0, or -1 (reason on stderr).
 */
int mock_llm_stats_file(mock_llm *m, const char *path);
/* A malloc'd copy of request i's outcome line (see above), or NULL. */
char *mock_llm_request_outcome(mock_llm *m, long i);
/*
 * Block until at least `n` responses have finished or `timeout_ms` passed.
 * Returns 0 when reached, -1 on timeout.
 */
int mock_llm_wait_responses(mock_llm *m, long n, long timeout_ms);

/* A malloc'd copy of request i's body (NUL-terminated), or NULL if none. */
char *mock_llm_request_body(mock_llm *m, long i);
/* A malloc'd copy of request i's path ("/v1/messages"), or NULL. */
char *mock_llm_request_path(mock_llm *m, long i);
/*
 * A malloc'd copy of request i's header `name` (case-insensitive) value,
 * with surrounding spaces trimmed, or NULL when absent.
 */
char *mock_llm_request_header(mock_llm *m, long i, const char *name);

#endif
