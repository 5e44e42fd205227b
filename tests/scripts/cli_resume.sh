#!/bin/sh
# tests/scripts/cli_resume.sh WEIR - resuming a session (issue #37 item 6):
#   - a new session's first event is session/start: the -c files as given,
#     a hash of the composed config (never a secret), the provider, model,
#     plugin rows and the cwd; `weir log --check` accepts it, an older log
#     without it still resumes, silently;
#   - resuming with another deployment says what differs on stderr before
#     the turn; --same-config reuses the recorded files (a relative one from
#     the directory the session was created in);
#   - `weir resume --last` is the newest session; a unique id prefix works
#     for resume, log, compact and send; an ambiguous one is a usage error
#     listing the candidates; an exact id always wins;
#   - an empty prompt is a usage error that writes nothing.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-resume.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
S=$WEIR_SESSION_DIR

# --- the header ------------------------------------------------------------------
mkdir "$TMP/proj"
cat >"$TMP/proj/keyed.json" <<'JSON'
{"plugins": [{"id": "openai", "plugin": "provider-openai",
              "config": {"api_key": "sk-very-secret-value", "base_url": "http://127.0.0.1:9/v1"}}]}
JSON
echo '{"agent": {"max_tokens": 99}}' >"$TMP/proj/small.json"
(cd "$TMP/proj" && "$WEIR" run -c default -c keyed.json -c small.json -s hdr "2 to the power 3?") \
    >/dev/null 2>"$TMP/err" || fail "run with a header: $(cat "$TMP/err")"
first=$(head -n 1 "$S/hdr.jsonl")
printf '%s\n' "$first" | grep -q '^{"seq":0,"time":[0-9]*,"type":"session/start","data":{"deployment":{"files":\["default","keyed.json","small.json"\],"config_hash":"fnv1a64:[0-9a-f]\{16\}","rows":\["scripted","compaction","retry","prompt","math","openai"\],"provider":"scripted","model":"demo"},"cwd":"'"$TMP"'/proj"},"ignorable":true}$' ||
    fail "the first event is not the header: $first"
grep -q 'sk-very-secret-value' "$S/hdr.jsonl" && fail "a secret reached the log"
"$WEIR" log hdr --check >"$TMP/check" 2>&1 || fail "check with a header: $(cat "$TMP/check")"
# the hash is of the redacted config: another key is no change, another value is
sed 's/sk-very-secret-value/sk-another-one/' "$TMP/proj/keyed.json" >"$TMP/proj/keyed2.json"
(cd "$TMP/proj" && "$WEIR" run -c default -c keyed2.json -c small.json -s hdr2 "2 to the power 3?") \
    >/dev/null 2>&1 || fail "run hdr2"
h1=$(head -n 1 "$S/hdr.jsonl" | sed 's/.*"config_hash":"\([^"]*\)".*/\1/')
h2=$(head -n 1 "$S/hdr2.jsonl" | sed 's/.*"config_hash":"\([^"]*\)".*/\1/')
[ "$h1" = "$h2" ] || fail "a new api key changed the hash ($h1, $h2)"
# a resume appends no second header
"$WEIR" resume hdr "2 to the power 4?" >/dev/null 2>&1 || fail "resume hdr"
[ "$(grep -c '"type":"session/start"' "$S/hdr.jsonl")" -eq 1 ] || fail "a second header"

# --- what differs, and --same-config -------------------------------------------------
(cd "$TMP/proj" && "$WEIR" resume -c default -c keyed.json -c small.json hdr "2 to the power 5?") \
    >/dev/null 2>"$TMP/err" || fail "resume, same files: $(cat "$TMP/err")"
grep -q 'created with\|differ\|changed' "$TMP/err" && fail "same deployment, yet a warning: $(cat "$TMP/err")"
"$WEIR" resume hdr "2 to the power 6?" >"$TMP/out" 2>"$TMP/err" || fail "resume, built-in"
grep -qx "weir: session hdr was created with -c default -c keyed.json -c small.json (in $TMP/proj); this run uses the built-in deployment" "$TMP/err" ||
    fail "no 'created with': $(cat "$TMP/err")"
grep -qx 'weir:   plugin rows no longer here: openai (their tools are gone)' "$TMP/err" ||
    fail "no missing row: $(cat "$TMP/err")"
grep -qx "weir:   config hash: $h1 -> fnv1a64:[0-9a-f]*" "$TMP/err" || fail "no hash line: $(cat "$TMP/err")"
grep -qx 'weir: hint: `weir resume --same-config hdr` reuses the files it was created with' "$TMP/err" ||
    fail "no hint: $(cat "$TMP/err")"
# said before the turn: before the answer's usage line
awk '/created with/ {c = NR} /^usage: / && !u {u = NR} END {exit !(c && u && c < u)}' "$TMP/err" ||
    fail "the difference is not said before the turn: $(cat "$TMP/err")"
# the provider and model, when they change
echo '{"agent": {"model": "other"}}' >"$TMP/model.json"
"$WEIR" resume -c default -c "$TMP/model.json" hdr2 "2 to the power 2?" >/dev/null 2>"$TMP/err"
grep -qx 'weir:   model: demo -> other' "$TMP/err" || fail "no model line: $(cat "$TMP/err")"
# --same-config from another directory: the relative files of the session's cwd
(cd "$TMP" && "$WEIR" resume --same-config hdr "2 to the power 7?") >"$TMP/out" 2>"$TMP/err" ||
    fail "--same-config: $(cat "$TMP/err")"
grep -q 'created with\|changed' "$TMP/err" && fail "--same-config still differs: $(cat "$TMP/err")"
grep -qx '2 to the power 7 is 128.' "$TMP/out" || fail "--same-config answer: $(cat "$TMP/out")"
# the same files, changed since: said too
echo '{"agent": {"max_tokens": 98}}' >"$TMP/proj/small.json"
"$WEIR" resume --same-config hdr "2 to the power 8?" >/dev/null 2>"$TMP/err" || fail "--same-config, changed"
grep -q "^weir: session hdr was created with the same files (-c default -c keyed.json -c small.json, in $TMP/proj), but the deployment they compose has changed since$" "$TMP/err" ||
    fail "no 'changed since': $(cat "$TMP/err")"
# an older log (no header): resumes without a word; --same-config cannot
"$WEIR" run -s old "2 to the power 2?" >/dev/null 2>&1 || fail "run old"
# (its first event another ignorable one: what a log of an older weir reads as)
sed '1s|"type":"session/start"|"type":"legacy/note"|' "$S/old.jsonl" >"$TMP/old.jsonl"
mv "$TMP/old.jsonl" "$S/old.jsonl"
grep -q '"type":"session/start"' "$S/old.jsonl" && fail "the old log still has a header"
"$WEIR" log old --check >"$TMP/check" 2>&1 || fail "the header-less log: $(cat "$TMP/check")"
"$WEIR" resume -c default -c "$TMP/model.json" old "2 to the power 3?" >/dev/null 2>"$TMP/err" ||
    fail "resume an older log: $(cat "$TMP/err")"
grep -q 'created with' "$TMP/err" && fail "an older log: a difference said: $(cat "$TMP/err")"
"$WEIR" resume --same-config old "hi" >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "--same-config on an older log: exit $rc, want 2"
grep -q 'records no deployment' "$TMP/err" || fail "--same-config on an older log: $(cat "$TMP/err")"

# --- --last and prefixes ----------------------------------------------------------------
"$WEIR" run -s alpha-one "2 to the power 2?" >/dev/null 2>&1 || fail "run alpha-one"
"$WEIR" run -s alpha-two "2 to the power 2?" >/dev/null 2>&1 || fail "run alpha-two"
"$WEIR" run -s beta "2 to the power 2?" >/dev/null 2>&1 || fail "run beta"
"$WEIR" run -s alpha "2 to the power 2?" >/dev/null 2>&1 || fail "run alpha"
"$WEIR" resume --last "2 to the power 9?" >"$TMP/out" 2>"$TMP/err" || fail "--last: $(cat "$TMP/err")"
grep -q "^weir: session alpha ($S/alpha.jsonl)$" "$TMP/err" || fail "--last is not the newest: $(cat "$TMP/err")"
"$WEIR" resume be "2 to the power 9?" >/dev/null 2>"$TMP/err" || fail "prefix be: $(cat "$TMP/err")"
grep -q "^weir: session beta " "$TMP/err" || fail "prefix be: $(cat "$TMP/err")"
"$WEIR" log alpha-o >"$TMP/out" 2>&1 || fail "log by prefix: $(cat "$TMP/out")"
grep -q '^user: 2 to the power 2?$' "$TMP/out" || fail "log by prefix: $(cat "$TMP/out")"
"$WEIR" compact be >/dev/null 2>"$TMP/err" || fail "compact by prefix: $(cat "$TMP/err")"
"$WEIR" send -s alpha-t "queued" >"$TMP/out" 2>&1 || fail "send by prefix: $(cat "$TMP/out")"
grep -q 'queued' "$S/alpha-two.jsonl" || fail "send by prefix: not in alpha-two"
# an exact id wins over the prefix of others
"$WEIR" resume alpha "2 to the power 2?" >/dev/null 2>"$TMP/err" || fail "exact alpha: $(cat "$TMP/err")"
grep -q "^weir: session alpha " "$TMP/err" || fail "exact alpha: $(cat "$TMP/err")"
# ambiguous: a usage error listing the candidates, nothing written
cp "$S/alpha-one.jsonl" "$TMP/before"
"$WEIR" resume alpha- "hi" >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "ambiguous prefix: exit $rc, want 2"
grep -qx "weir: session id prefix 'alpha-' is ambiguous: 2 sessions start with it: alpha-one, alpha-two" "$TMP/err" ||
    fail "ambiguous prefix: $(cat "$TMP/err")"
cmp -s "$TMP/before" "$S/alpha-one.jsonl" || fail "an ambiguous prefix wrote"
"$WEIR" log zzz >/dev/null 2>"$TMP/err"
[ $? -eq 4 ] || fail "no such prefix: want exit 4 ($(cat "$TMP/err"))"

# --- an empty prompt -------------------------------------------------------------------------
ls "$S" >"$TMP/before"
"$WEIR" run -s empty "" >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "empty prompt: exit $rc, want 2"
grep -q '^weir run: the prompt is empty' "$TMP/err" || fail "empty prompt: $(cat "$TMP/err")"
printf '  \n\n' | "$WEIR" run -s empty >/dev/null 2>&1
[ $? -eq 2 ] || fail "blank piped prompt: want exit 2"
ls "$S" | cmp -s - "$TMP/before" || fail "an empty prompt left a session: $(ls "$S")"

[ $FAILURES -eq 0 ] && echo "cli_resume: ok"
exit $FAILURES
