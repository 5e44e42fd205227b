/*
 * bench/bench_turn.h - the check every bench that runs turns through the
 * embedding API makes after each one: a bench measures work that was done,
 * so a turn that ended otherwise than "completed" with an answer (a dead
 * mock ends turns with an error, quickly) fails the bench instead of
 * counting as a fast step.  Header-only: each bench is one program.
 */
#ifndef WEIR_BENCH_TURN_H
#define WEIR_BENCH_TURN_H

#include <stdio.h>
#include <string.h>

#include "weir/host.h"

/* WEIR_OK when the agent's last turn completed with a non-empty answer;
 * else an error whose text (in *err) names `what` and how the turn ended. */
static inline int bench_turn_ok(weir_agent *agent, const char *what, weir_error *err) {
    weir_turn_outcome out = WEIR_TURN_OUTCOME_INIT;
    int rc = weir_agent_last_turn(agent, &out, err);
    if (rc == WEIR_OK && (strcmp(out.kind, "completed") != 0 || !out.text || !*out.text)) {
        snprintf(err->text, sizeof err->text, "%.200s: the turn ended %s%s%.700s", what,
                 out.kind[0] ? out.kind : "(unknown)",
                 out.failure_message[0] ? ": " : " without an answer", out.failure_message);
        rc = WEIR_E_INTERNAL;
    }
    weir_turn_outcome_clear(&out);
    return rc;
}

#endif
