#!/usr/bin/env python3
"""bench/split.py [--top N] CALLGRIND_OUT STEPS [LABEL] - where a step's instructions go.

Reads one callgrind profile of bench_overhead (collected inside weir_phase,
built with debug information so that every function has its source file)
and prints one line:

  split steps=N total=... http=... decode=... emit=... request=... log=...
      derive=... hooks=... tools=... compaction=... policy=... lifecycle=...
      malloc=...

each the instructions per step of one part of the host.  A function's own
instructions go to the part its source file belongs to (PARTS below; a few
functions are placed by name).  Shared code (libc, jansson, weir's
allocation and JSON helpers) has no part of its own: what it costs goes to
the part that called it, through the call arcs of the profile, and what it
calls back (libcurl calling weir's body callback) is taken off again.  So
the parts add up to `total`.  `malloc` is not a part: it is how much of the
total is malloc/free/realloc/calloc, whoever called them.  With --top N, the N
functions charged most in each part follow, one a line (before callbacks
are taken off: libcurl's line includes the body callback it runs).

The parts:
  http        libcurl and its libraries, core/runtime/http.c (the transfer, its
              callbacks' framing)
  decode      core/format/sse.c, the provider's stream decoder (delta scanner,
              jansson fallback, chunk assembly)
  emit        core/format/assistant_stream.c: chunks into the stream, live frames
  request     the provider's request body and its cache
  log         the session log's appends, serialization and store
  derive      the model-visible messages from the log (surface, derive)
  hooks       the hook runtime: dispatch, ordering, result schemas, records
  tools       the tool scheduler, the tool table, tools-ffi, libffi, libm
  compaction  compaction-basic
  policy      the other policy plugins of the chain (retry, system-prompt)
  lifecycle   the rest of the core: driver, agent, inbox, turn bookkeeping
"""
import re
import sys

# (part, source path fragment); the first match wins
PARTS = [
    ("http", "core/runtime/http.c"),
    ("decode", "core/format/sse.c"),
    ("decode", "provider-openai/openai_decode.c"),
    ("decode", "provider-openai/delta_scan.c"),
    ("decode", "provider-openai/openai.c"),
    ("decode", "provider-common/provider_common.c"),
    ("decode", "provider-common/provider_host.c"),
    ("request", "provider-openai/openai_request.c"),
    ("request", "provider-common/provider_cache.c"),
    ("request", "provider-common/model_table.c"),
    ("emit", "core/format/assistant_stream.c"),
    ("derive", "core/format/surface.c"),
    ("log", "core/log/session_log.c"),
    ("log", "core/log/log_check.c"),
    ("log", "core/base/json_write.c"),
    ("log", "core/log/store_file.c"),
    ("log", "core/log/store_memory.c"),
    ("log", "core/api/store_ops.c"),
    ("log", "core/api/sessions.c"),
    ("log", "core/format/event_catalog.c"),
    ("hooks", "core/runtime/hooks.c"),
    ("hooks", "core/format/hook_catalog.c"),
    ("hooks", "core/format/schema.c"),
    ("hooks", "core/api/provenance.c"),
    ("tools", "core/engine/tool_scheduler.c"),
    ("tools", "core/runtime/tools.c"),
    ("tools", "core/base/pool.c"),
    ("tools", "plugins/tools-ffi/"),
    ("compaction", "plugins/compaction-basic/"),
    ("policy", "plugins/"),
    ("lifecycle", "core/"),
    ("lifecycle", "bench/"),
]
# functions placed by name, whatever their file
BY_NAME = {"weir__log_derive": "derive", "weir__stream_emit": "emit", "weir__stream_frame": "emit",
           "weir__stream_release": "emit", "weir__stream_observed": "emit"}
# objects whose code is a part of its own, whoever calls it
OBJECTS = [("http", "libcurl"), ("http", "libssl"), ("http", "libcrypto"),
           ("http", "libnghttp2"), ("http", "libz."), ("tools", "libffi"), ("tools", "libm.")]
# weir's own shared helpers: no part, like libc and jansson
SHARED = ["core/base/alloc.c", "core/base/util.c", "core/base/errors.c", "core/base/common.h", "core/base/idmap.c"]
MALLOC = {"malloc", "free", "realloc", "calloc", "_int_malloc", "_int_free", "malloc_consolidate",
          "_int_realloc", "cfree", "__libc_malloc", "__libc_free"}
ORDER = ["http", "decode", "emit", "request", "log", "derive", "hooks", "tools", "compaction",
         "policy", "lifecycle"]


def part_of(obj, fl, fn):
    if fn in BY_NAME:
        return BY_NAME[fn]
    for p, frag in OBJECTS:
        if frag in obj:
            return p
    if any(s in fl for s in SHARED):
        return None
    for p, frag in PARTS:
        if frag in fl:
            return p
    return None  # libc, jansson, ld.so: shared


def short(path):
    """`path` from the source tree's own folders on (no machine's path)."""
    m = re.search(r"(?:^|/)((?:core|plugins|bench|sdk|tests|include)/.*)$", path)
    return m.group(1) if m else path.rsplit("/", 1)[-1]


def parse(path):
    names = {"ob": {}, "fl": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
               "cfl": "fl", "fn": "fn", "cfn": "fn"}
    self_ir = {}   # func -> own instructions
    arcs = {}      # (caller, callee) -> inclusive instructions of the calls
    ob = fl = ""
    fn = None
    cob = cfl = cfn = None
    pending_call = False
    total = None

    def name(kind, val):
        m = re.match(r"\((\d+)\)(?: (.*))?$", val)
        if not m:
            return val
        table = names[kind_of[kind]]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), val)

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 else 0
                if pending_call:
                    key = (fn, (cob or ob, cfl or fl, cfn))
                    arcs[key] = arcs.get(key, 0) + ir
                    pending_call = False
                    cob = cfl = cfn = None
                else:
                    self_ir[fn] = self_ir.get(fn, 0) + ir
                continue
            k, _, v = line.partition("=")
            if k == "ob":
                ob = name(k, v)
            elif k == "fl":
                fl = name(k, v)
            elif k in ("fi", "fe"):
                name(k, v)  # inlined code: the function keeps its own file
            elif k == "fn":
                fn = (ob, fl, name(k, v))
            elif k == "cob":
                cob = name(k, v)
            elif k in ("cfi", "cfl"):
                cfl = name(k, v)
            elif k == "cfn":
                cfn = name(k, v)
            elif k == "calls":
                pending_call = True
            elif line.startswith("summary:") or line.startswith("totals:"):
                if total is None:
                    total = int(line.split()[1])
    return self_ir, arcs, total


def main():
    args = sys.argv[1:]
    top = 0
    if len(args) >= 2 and args[0] == "--top":
        top = int(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit("usage: split.py [--top N] CALLGRIND_OUT STEPS [LABEL]")
    self_ir, arcs, total = parse(args[0])
    steps = int(args[1])
    label = args[2] if len(args) > 2 else "split"
    funcs = set(self_ir) | {a for a, _ in arcs} | {b for _, b in arcs}
    part = {fn: part_of(fn[0], fn[1], fn[2]) for fn in funcs}
    cost = {p: 0 for p in ORDER}
    by_fn = {}  # function -> what it is charged (its own and its calls into shared code)
    # own instructions of the functions that have a part
    for fn, ir in self_ir.items():
        if part[fn]:
            cost[part[fn]] += ir
            by_fn[fn] = by_fn.get(fn, 0) + ir
    # calls into shared code: charged to the caller's part; who "owns" each
    # shared function (the parts that reach it, weighted by the instructions
    # of the arcs) is needed to take its callbacks off again
    owner = {}
    into = {}
    for (a, b), ir in arcs.items():
        if part[b] is None:
            into.setdefault(b, []).append((a, ir))
            if part[a]:
                cost[part[a]] += ir
                by_fn[a] = by_fn.get(a, 0) + ir
    for _ in range(50):  # shared code calls shared code: settle the owners
        changed = False
        for b, callers in into.items():
            dist = {}
            for a, ir in callers:
                if part[a]:
                    dist[part[a]] = dist.get(part[a], 0) + ir
                else:
                    for p, share in owner.get(a, {}).items():
                        dist[p] = dist.get(p, 0) + ir * share
            s = sum(dist.values())
            new = {p: v / s for p, v in dist.items()} if s else {}
            if new != owner.get(b):
                owner[b] = new
                changed = True
        if not changed:
            break
    for (a, b), ir in arcs.items():
        if part[a] is None and part[b]:  # a callback out of shared code
            for p, share in owner.get(a, {}).items():
                cost[p] -= ir * share
    malloc = sum(ir for (a, b), ir in arcs.items()
                 if b[2] in MALLOC and a[2] not in MALLOC)
    if total is None:
        total = sum(self_ir.values())
    print("%s steps=%d total=%d %s malloc=%d" % (
        label, steps, total // steps,
        " ".join("%s=%d" % (p, cost[p] // steps) for p in ORDER), malloc // steps))
    for p in ORDER if top else []:  # the functions each part is charged for, before callbacks
        fns = sorted((f for f in by_fn if part[f] == p), key=lambda f: -by_fn[f])[:top]
        for f in fns:
            print("  %-10s %9d  %s (%s)" % (p, by_fn[f] // steps, f[2], short(f[1] or f[0])))


if __name__ == "__main__":
    main()
