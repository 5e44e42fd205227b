/*
 * core/api/provenance.h - where the hook chains' provenance records go: the
 * hook/decision, hook/quarantined and hook/slow events of an agent's
 * session log (docs/hooks.md, "Provenance"; docs/session-log.md).
 */
#ifndef WEIR_CORE_PROVENANCE_H
#define WEIR_CORE_PROVENANCE_H

#include "hooks.h"

/*
 * The sink the wiring root (core/api/api.c) gives a host's chains: appends `rec` as an ignorable
 * event of `agent`'s log (a failed append is reported on stderr and
 * otherwise ignored: provenance never fails a hop).  Called on the thread
 * of the invocation, never under the log's lock.
 */
void weir__provenance_sink(weir_agent *agent, const weir__hook_record *rec);

/* The agent's count of queued next-step input (moves when a listener steers). */
size_t weir__provenance_mark(weir_agent *agent);

#endif
