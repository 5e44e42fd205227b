/*
 * plugins/tools-mcp/mcp_map.h - the pure translations of tools-mcp: tool
 * names, which configured values are secrets, CallToolResult to a weir tool
 * result, `${VAR}` expansion for .mcp.json files, MCP log levels.  No host API; the unit tests compile
 * this file directly.
 */
#ifndef WEIR_MCP_MAP_H
#define WEIR_MCP_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/** The longest tool name the model APIs accept (OpenAI, Anthropic: [A-Za-z0-9_-]{1,64}). */
#define MCP_TOOL_NAME_MAX 64

/** True when `s` is 1 or more of [A-Za-z0-9_-] and at most `max` bytes (0: no limit). */
bool mcp_name_ok(const char *s, size_t max);

/**
 * "mcp__<server>__<tool>" into `out`.  @return true when it fits the model
 * APIs' rule (characters and MCP_TOOL_NAME_MAX); false otherwise, with
 * the reason ("has characters outside [A-Za-z0-9_-]", "is longer than 64
 * characters") in `why`.
 */
bool mcp_tool_name(const char *server, const char *tool, char *out, size_t size, char *why,
                   size_t why_size);

/**
 * True when a string anywhere in `v` (borrowed; object members and array
 * elements, 64 levels deep, deeper counts as true) holds a NUL byte, which
 * a message may carry (\u0000) and weir's tools and logs cannot.
 */
bool mcp_json_has_nul(const json_t *v);

/**
 * True when an `env` variable of this name holds a secret: its name contains
 * TOKEN, KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL, in any case
 * (GITHUB_TOKEN, api_key, DB_PASSWORD, GOOGLE_APPLICATION_CREDENTIALS).
 * A server's `secret_env` names the others.  NULL is not.
 */
bool mcp_env_name_secret(const char *name);

/**
 * True when a header of this name carries credentials: Authorization,
 * Proxy-Authorization, Cookie, or any name that contains AUTH, COOKIE,
 * TOKEN, KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL, in any case
 * (X-Api-Key, X-Auth-Token).  NULL is not.
 */
bool mcp_header_name_secret(const char *name);

/**
 * Map a CallToolResult (borrowed) to a weir tool result, a new reference
 * {"content":[blocks], "is_error"?:true}:
 *   text -> text; image -> {type:"image", media_type, data};
 *   audio -> a text note (weir's messages have no audio);
 *   resource_link -> text naming its URI (and name, title, description, type);
 *   resource (embedded) -> its text with a header naming the URI, or a note
 *     for a blob;
 *   any other block -> its JSON as text;
 *   structuredContent -> its JSON as one text block when no text block came;
 *   isError:true -> is_error; nothing at all -> one text block "(no content)".
 * The text blocks together keep at most `max_text` bytes (0: no limit): a
 * longer text is cut on a UTF-8 boundary and ends with a note saying how
 * much was dropped.  NULL when `res` is not an object with a content array
 * (`why` says what is wrong) or out of memory.
 */
json_t *mcp_map_result(const json_t *res, size_t max_text, char *why, size_t why_size);

/**
 * Expand ${VAR} and ${VAR:-default} in `s` as Claude Code does for
 * .mcp.json (command, args, env, url, headers): an unset variable without a
 * default stays as written and its name is appended to `unset` (comma
 * separated, may be NULL).  @return a malloc'd string, NULL when out of memory.
 */
char *mcp_expand(const char *s, char *unset, size_t unset_size);

/** weir's log level for an MCP (RFC 5424) level name: 0 error .. 3 debug. */
int mcp_log_level(const char *level);

#endif
