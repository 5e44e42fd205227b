/*
 * core/api/generation.h - the generation tracker's internals (the public API is
 * include/weir/generation.h; the rules are in docs/generations.md).
 * Owner: core/api/generation.c.
 */
#ifndef WEIR_CORE_GENERATION_H
#define WEIR_CORE_GENERATION_H

#include "common.h"
#include "weir/generation.h"

/*
 * The text blocks of `message` (borrowed: a message object), joined without
 * separator, as a new string reference ("" when there is none), or NULL on
 * allocation failure.  *has_tool_calls (may be NULL) is set when the
 * message holds a tool_call block.  Thread-safe.
 */
json_t *weir__generation_text(const json_t *message, bool *has_tool_calls);

/*
 * The background job id in a tool/result message (borrowed): the job_id of
 * the receipt {"status":"queued","job_id",...} that the tool scheduler puts
 * in a background call's result text, or NULL.  The string is written into
 * buf (size bytes); returns buf or NULL.  Thread-safe.
 */
const char *weir__generation_receipt_job(const json_t *message, char *buf, size_t size);

#endif
