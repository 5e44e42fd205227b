#!/usr/bin/env python3
"""bench/peers/raw_client.py - the peer benchmark's floor (issue #15): a raw
Python http.client doing what the agents do, and nothing else.  S sessions of
K steps, in one process, against the mock at BASE_URL: per step the next
body (the conversation so far, json.dumps), one POST on a keep-alive
connection, the SSE lines read and each delta parsed with json.loads, the
text assembled and appended.  Only the loop is timed.  One line:

  peer name=python-raw sessions=S steps=K loop_ms_per_step=... peak_rss_mb=...

usage: raw_client.py BASE_URL [SESSIONS [STEPS]]
"""
import http.client
import json
import resource
import sys
import time
import urllib.parse


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    url = urllib.parse.urlparse(sys.argv[1])
    sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    conn = http.client.HTTPConnection(url.hostname, url.port)
    path = url.path.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               "Authorization": "Bearer bench-key"}
    t0 = time.monotonic()
    for s in range(sessions):
        messages = []
        for k in range(steps):
            messages.append({"role": "user",
                             "content": f"session {s}, step {k}: tell me about peers"})
            body = json.dumps({"model": "bench", "max_tokens": 256, "stream": True,
                               "stream_options": {"include_usage": True},
                               "messages": messages})
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            if resp.status != 200:
                print(f"raw_client: status {resp.status}", file=sys.stderr)
                return 2
            text = []
            for line in resp:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        text.append(piece)
            if not text:
                print("raw_client: an empty answer", file=sys.stderr)
                return 2
            messages.append({"role": "assistant", "content": "".join(text)})
    loop = (time.monotonic() - t0) * 1000.0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"peer name=python-raw sessions={sessions} steps={steps} "
          f"loop_ms_per_step={loop / (sessions * steps):.3f} peak_rss_mb={rss:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
