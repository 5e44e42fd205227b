/*
 * core/agent.h - struct weir_agent, the driver (DESIGN §3) and the stream
 * handed to providers.  Owner: core/agent.c (open/close/send/cancel/state)
 * and core/driver.c (the turn/step lifecycle).
 */
#ifndef WEIR_CORE_AGENT_H
#define WEIR_CORE_AGENT_H

#include "common.h"
#include "http.h"
#include "inbox.h"
#include "session_log.h"
#include "signal.h"

/* The agent's reused HTTP handle and signal, for api->http_sse. */
weir__http *weir__stream_http(weir_stream *stream);
/* Public-table implementations. */
int weir__stream_emit(weir_stream *stream, json_t *chunk);
weir_signal *weir__stream_signal(weir_stream *stream);
int weir__agent_append(weir_agent *agent, const char *type, const json_t *data,
                       weir_error *err);

#endif
