/*
 * plugins/provider-scripted/demo.h - the built-in demo's replies (demo.c).
 */
#ifndef WEIR_SCRIPTED_DEMO_H
#define WEIR_SCRIPTED_DEMO_H

#include <jansson.h>

/*
 * The demo's reply to `request` (borrowed: {messages, tools?, tool_choice?,
 * ...}), as one reply of a script ({text, chunks, tool_calls?}).
 * Returns a new reference, or NULL when memory runs out.
 */
json_t *scripted_demo_reply(const json_t *request);

#endif
