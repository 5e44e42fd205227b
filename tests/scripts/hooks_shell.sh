#!/bin/sh
# tests/scripts/hooks_shell.sh - hooks-shell (docs/hooks-shell.md): real
# hook scripts run through `weir run` against the loopback mock LLM
# (provider-openai).  The tool is tools-ffi's strlen named "Bash" (its
# result is the length of `command`, so a rewritten input shows).
#   1. PreToolUse exit 2 blocks: stderr in the tool result and in the next request;
#      the hook's stdin has Claude Code's fields, its environment ours
#   2. a JSON deny carries its reason
#   3. updatedInput changes the arguments the tool runs with
#   4. UserPromptSubmit additionalContext reaches the first request
#   5. a Stop decision:block continues the turn once
#   6. a hook past its timeout fails open, is named, and leaves no process behind
#   7. tests/data/hooks (a settings.json + validator in the shape of the
#      official bash validator example) runs unchanged
#   8. "ask" without a host that can answer (weir run) is a deny saying so
#   9. "ask" over `weir serve --stdio`: approval.requested, then
#      {"op":"approve"} allow runs the call, deny gives its reason
#  10. guards that cannot run (EMFILE under `ulimit -n`, a program that
#      cannot be executed, an exit code lost to an ignored SIGCHLD) block the
#      call, naming the hook and the OS error; guard_failure "allow" goes on
#      with a warning; a bad value is a load error naming the key
#  11. PermissionRequest runs after the PreToolUse hooks of a call they did
#      not block (and not after a block): a JSON deny blocks with its message,
#      exit 2 with stderr, allow runs it (with updatedInput), one that
#      cannot start blocks it, and a deny with interrupt:true ends the turn
# `weir log --check` passes on every session written.
set -- openai
. "$(dirname "$0")/providers_lib.sh"
require_weir_run
DATA=$(cd "$(dirname "$0")/../data/hooks" && pwd)

BASH_TOOL=',
    {"id": "sh", "plugin": "tools-ffi",
     "config": {"tools": [{"library": "libc.so.6", "symbol": "strlen", "name": "Bash",
                           "prototype": "size_t strlen(const char *command)",
                           "description": "run a command (here: its length)"}]}}'

# hooks_row CONFIG_JSON: the hooks-shell row.
hooks_row() {
    printf ',\n    {"id": "cc-hooks", "plugin": "hooks-shell", "config": %s}' "$1"
}

# run_case NAME SCRIPT_JSON PROMPT HOOKS_CONFIG: one `weir run --json`
# (under `ulimit -n $FD_LIMIT` when that is set, through $RUN_WRAP, a
# command prefix, when that is); leaves OUT, ERR, LOG.
run_case() {
    start_mock "$2"
    write_config "$TMP/$1.json" "" "$BASH_TOOL$(hooks_row "$4")"
    OUT="$TMP/$1.out"
    ERR="$TMP/$1.err"
    LOG="$TMP/sessions/$1.jsonl"
    (if [ -n "${FD_LIMIT:-}" ]; then ulimit -n "$FD_LIMIT" || exit 99; fi
     exec timeout 60 ${RUN_WRAP:-} "$WEIR" run -c "$TMP/$1.json" -s "$1" --json "$3") > "$OUT" 2> "$ERR"
    RC=$?
    stop_mock
    [ -f "$LOG" ] || { fail "$1: no session log"; cat "$ERR" >&2; return 1; }
    "$WEIR" log "$LOG" --check > "$TMP/$1.check" 2>&1 || { fail "$1: weir log --check"; cat "$TMP/$1.check" >&2; }
    grep -q '"kind":"completed"' "$OUT" || { fail "$1: the turn did not complete (rc $RC)"; cat "$ERR" >&2; }
    [ "$RC" = 0 ] || { fail "$1: weir run exited $RC"; cat "$ERR" >&2; }
    grep -q 'Sanitizer\|runtime error' "$ERR" && { fail "$1: sanitizer report"; cat "$ERR" >&2; }
    return 0
}

# A tool turn: call Bash with COMMAND, then answer once the request contains EXPECT.
tool_script() {
    printf '{"requests":[{"tool_calls":[{"id":"call_1","name":"Bash","arguments":"{\\"command\\":\\"%s\\"}"}]},{"text":"finished.","expect":{"message_contains":"%s"}}]}' "$1" "$2"
}

# 1. exit 2 blocks; stdin and environment
cat > "$TMP/guard.sh" <<EOF
#!/bin/sh
input=\$(cat)
printf '%s\n' "\$input" > "$TMP/stdin.json"
printf '%s|%s\n' "\$CLAUDE_PROJECT_DIR" "\$WEIR_SESSION_ID" > "$TMP/env.txt"
cmd=\$(printf '%s' "\$input" | jq -r '.tool_input.command // empty')
case \$cmd in
*"rm -rf"*) echo "GUARD: rm -rf is not allowed here" >&2; exit 2 ;;
esac
exit 0
EOF
chmod +x "$TMP/guard.sh"
mkdir -p "$TMP/proj"
HOOKS1=$(printf '{"cwd": "%s", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "%s"}]}]}}' "$TMP/proj" "$TMP/guard.sh")
if run_case block "$(tool_script 'rm -rf /tmp/nothing' 'GUARD: rm -rf is not allowed here')" "clean up" "$HOOKS1"; then
    event_line "$LOG" tool/result | grep -q 'GUARD: rm -rf is not allowed here' || fail "block: tool/result lacks the hook's stderr"
    event_line "$LOG" tool/result | grep -q '"is_error": *true' || fail "block: tool/result is not an error"
    S="$TMP/stdin.json"
    [ "$(jq -r .hook_event_name "$S")" = PreToolUse ] || fail "block: stdin hook_event_name"
    [ "$(jq -r .session_id "$S")" = block ] || fail "block: stdin session_id"
    [ "$(jq -r .transcript_path "$S")" = "$LOG" ] || fail "block: stdin transcript_path $(jq -r .transcript_path "$S")"
    [ "$(jq -r .cwd "$S")" = "$TMP/proj" ] || fail "block: stdin cwd"
    [ "$(jq -r .tool_name "$S")" = Bash ] || fail "block: stdin tool_name"
    [ "$(jq -r .tool_input.command "$S")" = "rm -rf /tmp/nothing" ] || fail "block: stdin tool_input"
    [ "$(jq -r .tool_use_id "$S")" = call_1 ] || fail "block: stdin tool_use_id"
    [ "$(jq -r .permission_mode "$S")" = default ] || fail "block: stdin permission_mode"
    [ "$(cat "$TMP/env.txt")" = "$TMP/proj|block" ] || fail "block: environment $(cat "$TMP/env.txt")"
fi

# 2. JSON deny with its reason
HOOKS2='{"hooks": {"PreToolUse": [{"matcher": "^Ba.*$", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"JSON-DENY-REASON\"}}'"'"'"}]}]}}'
if run_case deny "$(tool_script 'ls' 'JSON-DENY-REASON')" "list" "$HOOKS2"; then
    event_line "$LOG" tool/result | grep -q 'JSON-DENY-REASON' || fail "deny: tool/result lacks the reason"
fi

# 3. updatedInput: strlen runs on the hook's command (16), not the model's (2)
HOOKS3='{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\",\"updatedInput\":{\"command\":\"0123456789abcdef\"}}}'"'"'"}]}]}}'
if run_case rewrite "$(tool_script 'ls' '16')" "list" "$HOOKS3"; then
    event_line "$LOG" tool/result | grep -q '16' || fail "rewrite: the tool did not run with updatedInput"
fi

# 4. UserPromptSubmit additionalContext in the first request
HOOKS4='{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"CTX-FROM-HOOK\"}}'"'"'"}]}]}}'
run_case prompt '{"requests":[{"text":"seen.","expect":{"message_contains":"CTX-FROM-HOOK"}}]}' "hello" "$HOOKS4"

# 5. Stop decision:block once (the hook honours stop_hook_active)
cat > "$TMP/stop.sh" <<EOF
#!/bin/sh
input=\$(cat)
echo x >> "$TMP/stop.count"
[ "\$(printf '%s' "\$input" | jq -r .stop_hook_active)" = true ] && exit 0
echo '{"decision":"block","reason":"RUN-THE-TESTS first"}'
EOF
chmod +x "$TMP/stop.sh"
HOOKS5=$(printf '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "%s"}]}]}}' "$TMP/stop.sh")
if run_case stop '{"requests":[{"text":"all done."},{"text":"tests pass.","expect":{"message_contains":"RUN-THE-TESTS first"}}]}' "finish" "$HOOKS5"; then
    [ "$(count_events "$LOG" assistant/message)" = 2 ] || fail "stop: expected 2 assistant messages"
    [ "$(count_events "$LOG" turn/end)" = 1 ] || fail "stop: expected one turn"
    [ "$(wc -l < "$TMP/stop.count")" -eq 2 ] || fail "stop: the hook ran $(wc -l < "$TMP/stop.count") times"
fi

# 6. timeout: the hook and what it started are killed; the call goes on
cat > "$TMP/slow.sh" <<EOF
#!/bin/sh
sleep 300 &
echo \$! > "$TMP/bg.pid"
echo \$\$ > "$TMP/fg.pid"
sleep 300
EOF
chmod +x "$TMP/slow.sh"
HOOKS6=$(printf '{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "%s", "timeout": 1}]}]}}' "$TMP/slow.sh")
if run_case slow "$(tool_script 'ab' '2')" "go" "$HOOKS6"; then
    event_line "$LOG" tool/result | grep -q '"is_error": *true' && fail "slow: the call did not run"
    grep -q "timed out" "$ERR" && grep -q "slow.sh" "$ERR" || fail "slow: no warning naming the hook: $(cat "$ERR")"
    for f in bg fg; do
        pid=$(cat "$TMP/$f.pid" 2>/dev/null)
        [ -n "$pid" ] || { fail "slow: the hook did not start"; continue; }
        # gone, or a zombie its new parent has not reaped yet
        i=0
        while st=$(ps -o stat= -p "$pid" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ] &&
            [ $i -lt 20 ]; do
            i=$((i + 1))
            sleep 0.1
        done
        st=$(ps -o stat= -p "$pid" 2>/dev/null)
        if [ -n "$st" ] && [ "${st#Z}" = "$st" ]; then
            fail "slow: process $pid ($f) is still running"
            kill -9 "$pid" 2>/dev/null
        fi
    done
fi

# 7. the real-world-shaped settings file, unchanged
HOOKS7=$(printf '{"cwd": "%s", "settings": ".claude/settings.json"}' "$DATA")
if run_case validator "$(tool_script 'grep -r foo .' "instead of 'grep'")" "search" "$HOOKS7"; then
    event_line "$LOG" tool/result | grep -q "Use 'rg' (ripgrep)" || fail "validator: tool/result lacks the validator's message"
fi
if run_case validator_ok "$(tool_script 'rg foo' 'Bash')" "search" "$HOOKS7"; then
    event_line "$LOG" tool/result | grep -q '"is_error": *true' && fail "validator_ok: a good command was blocked"
fi

# 8. ask under weir run: nobody can approve
ASK='{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"ASK-WHY\"}}'"'"'"}]}]}}'
if run_case ask_run "$(tool_script 'ls' 'no one could approve')" "list" "$ASK"; then
    event_line "$LOG" tool/result | grep -q 'ASK-WHY' || fail "ask_run: the deny lacks the hook's reason"
fi

# 9. ask over weir serve --stdio
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}
start_mock '{"requests":[
    {"tool_calls":[{"id":"call_1","name":"Bash","arguments":"{\"command\":\"0123456789\"}"}]},
    {"text":"ran it.","expect":{"message_contains":"10"}},
    {"tool_calls":[{"id":"call_2","name":"Bash","arguments":"{\"command\":\"ls\"}"}]},
    {"text":"skipped it.","expect":{"message_contains":"not approved: NOPE"}}]}'
write_config "$TMP/serve.json" "" "$BASH_TOOL$(hooks_row "$ASK")"
rm -f "$TMP/in"
mkfifo "$TMP/in"
timeout 60 "$WEIR" serve --stdio -c "$TMP/serve.json" -s serve-ask < "$TMP/in" > "$TMP/serve.out" 2> "$TMP/serve.err" &
SPID=$!
exec 3> "$TMP/in"
echo '{"op":"send","text":"run it"}' >&3
if wait_for "$TMP/serve.out" '"approval.requested"'; then
    line=$(grep '"approval.requested"' "$TMP/serve.out" | head -n 1)
    printf '%s' "$line" | grep -q '"reason":"ASK-WHY"' || fail "serve: approval.requested lacks the reason: $line"
    printf '%s' "$line" | grep -q '"tool":"Bash"' || fail "serve: approval.requested lacks the tool"
    id=$(printf '%s' "$line" | jq -r .request_id)
    echo '{"op":"approve","request_id":"nope","decision":"allow"}' >&3
    printf '{"op":"approve","request_id":"%s","decision":"allow"}\n' "$id" >&3
    wait_for "$TMP/serve.out" 'ran it' || fail "serve: the approved turn did not finish"
    echo '{"op":"send","text":"again"}' >&3
    if [ "$(grep -c '"approval.requested"' "$TMP/serve.out")" -lt 2 ]; then
        i=0
        while [ "$(grep -c '"approval.requested"' "$TMP/serve.out")" -lt 2 ] && [ $i -lt 300 ]; do
            i=$((i + 1)); sleep 0.1
        done
    fi
    id=$(grep '"approval.requested"' "$TMP/serve.out" | sed -n 2p | jq -r .request_id)
    printf '{"op":"approve","request_id":"%s","decision":"deny","reason":"NOPE"}\n' "$id" >&3
    wait_for "$TMP/serve.out" 'skipped it' || fail "serve: the denied turn did not finish"
    grep -q '"type":"error".*no approval request' "$TMP/serve.out" || fail "serve: a wrong request_id is not an error"
else
    fail "serve: no approval.requested: $(cat "$TMP/serve.err")"
fi
echo '{"op":"shutdown"}' >&3
exec 3>&-
wait $SPID || fail "serve: exit $?: $(cat "$TMP/serve.err")"
grep -q 'Sanitizer\|runtime error' "$TMP/serve.err" && fail "serve: sanitizer report: $(cat "$TMP/serve.err")"
stop_mock
SLOG="$TMP/sessions/serve-ask.jsonl"
"$WEIR" log "$SLOG" --check > "$TMP/serve.check" 2>&1 || { fail "serve: weir log --check"; cat "$TMP/serve.check" >&2; }
grep '"tool/result"' "$SLOG" | head -n 1 | grep -q '10' || fail "serve: the approved call did not run"
grep '"tool/result"' "$SLOG" | sed -n 2p | grep -q 'not approved: NOPE' || fail "serve: the denied call's result"

# 10. guards that cannot start.  80 distinct allowing hooks need about 300
# descriptors at once: under `ulimit -n 96` most cannot start (EMFILE), and
# the call must not run (before: "could not start ...; going on without it").
many_hooks() { # many_hooks EXTRA_ROW_KEYS: 80 hooks that allow
    i=0 list=''
    while [ $i -lt 80 ]; do
        list="$list${list:+,}{\"type\": \"command\", \"command\": \"cat >/dev/null; exit 0 # $i\"}"
        i=$((i + 1))
    done
    printf '{%s"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [%s]}]}}' "$1" "$list"
}
FD_LIMIT=96
if run_case emfile "$(tool_script 'ab' 'could not start')" "go" "$(many_hooks '')"; then
    R=$(event_line "$LOG" tool/result)
    printf '%s' "$R" | grep -q '"is_error": *true' || fail "emfile: the call ran though its guards could not start: $R"
    printf '%s' "$R" | grep -q 'Too many open files' || fail "emfile: the reason lacks the OS error: $R"
    printf '%s' "$R" | grep -q 'PreToolUse hook `cat >/dev/null; exit 0 # [0-9]*` could not start' ||
        fail "emfile: the reason does not name the hook: $R"
    grep -q 'the call is blocked' "$ERR" || fail "emfile: no warning: $(cat "$ERR")"
    [ "$(grep -c 'could not start' "$ERR")" = 1 ] || fail "emfile: not one warning for the event: $(cat "$ERR")"
fi
# guard_failure "allow": the row chooses to fail open, with the warning
if run_case emfile_allow "$(tool_script 'ab' '2')" "go" "$(many_hooks '"guard_failure": "allow", ')"; then
    event_line "$LOG" tool/result | grep -q '"is_error": *true' && fail "emfile_allow: the call did not run"
    grep -q 'could not start.*Too many open files.*going on without it' "$ERR" ||
        fail "emfile_allow: no warning: $(cat "$ERR")"
fi
FD_LIMIT=
# an exec-form guard whose program does not exist could not start: blocked
HOOKS10='{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/nonexistent/guard-bin", "args": ["x"]}]}]}}'
if run_case noexec "$(tool_script 'ab' 'cannot execute')" "go" "$HOOKS10"; then
    R=$(event_line "$LOG" tool/result)
    printf '%s' "$R" | grep -q '"is_error": *true' || fail "noexec: the call ran: $R"
    printf '%s' "$R" | grep -q 'cannot execute /nonexistent/guard-bin: No such file or directory' ||
        fail "noexec: the reason: $R"
fi
# weir started with SIGCHLD ignored: the kernel reaps the hook, and an exit
# code that is lost is not an allow (before: "non-blocking status code: -1")
if env --ignore-signal=CHLD true 2>/dev/null; then
    HOOKS11='{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "cat >/dev/null; exit 0"}]}]}}'
    RUN_WRAP='env --ignore-signal=CHLD'
    if run_case nowait "$(tool_script 'ab' 'could not be waited for')" "go" "$HOOKS11"; then
        R=$(event_line "$LOG" tool/result)
        printf '%s' "$R" | grep -q '"is_error": *true' || fail "nowait: the call ran: $R"
        printf '%s' "$R" | grep -q 'waitpid: No child processes' || fail "nowait: the reason: $R"
    fi
    RUN_WRAP=
else
    echo "note: env --ignore-signal is not available; the SIGCHLD case is skipped" >&2
fi
# 11. PermissionRequest runs where weir decides permission: right after the
# PreToolUse hooks of the call (before: skipped at load, so its deny never ran)
PR_DENY='{"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"PR-DENY-MESSAGE\"}}}'"'"'"}]}]}}'
if run_case pr_deny "$(tool_script 'ls' 'PR-DENY-MESSAGE')" "list" "$PR_DENY"; then
    R=$(event_line "$LOG" tool/result)
    printf '%s' "$R" | grep -q '"is_error": *true' || fail "pr_deny: the call ran: $R"
    printf '%s' "$R" | grep -q 'PR-DENY-MESSAGE' || fail "pr_deny: the result lacks the message: $R"
fi
# exit 2 denies with stderr; stdin has Claude Code's PermissionRequest fields
cat > "$TMP/pr_guard.sh" <<EOF
#!/bin/sh
cat > "$TMP/pr_stdin.json"
echo "PR-EXIT2: not in this project" >&2
exit 2
EOF
chmod +x "$TMP/pr_guard.sh"
PR_EXIT2=$(printf '{"hooks": {"PermissionRequest": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "%s"}]}]}}' "$TMP/pr_guard.sh")
if run_case pr_exit2 "$(tool_script 'ls -l' 'PR-EXIT2: not in this project')" "list" "$PR_EXIT2"; then
    event_line "$LOG" tool/result | grep -q '"is_error": *true' || fail "pr_exit2: the call ran"
    S="$TMP/pr_stdin.json"
    [ "$(jq -r .hook_event_name "$S")" = PermissionRequest ] || fail "pr_exit2: stdin hook_event_name"
    [ "$(jq -r .tool_name "$S")" = Bash ] || fail "pr_exit2: stdin tool_name"
    [ "$(jq -r .tool_input.command "$S")" = "ls -l" ] || fail "pr_exit2: stdin tool_input"
    [ "$(jq -c .permission_suggestions "$S")" = '[]' ] || fail "pr_exit2: stdin permission_suggestions"
    [ "$(jq -r .session_id "$S")" = pr_exit2 ] || fail "pr_exit2: stdin session_id"
fi
# allow runs the call, with its updatedInput (16 characters, not the model's 2)
PR_ALLOW='{"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\",\"updatedInput\":{\"command\":\"0123456789abcdef\"}}}}'"'"'"}]}]}}'
if run_case pr_allow "$(tool_script 'ls' '16')" "list" "$PR_ALLOW"; then
    R=$(event_line "$LOG" tool/result)
    printf '%s' "$R" | grep -q '"is_error": *true' && fail "pr_allow: the call did not run: $R"
    printf '%s' "$R" | grep -q '16' || fail "pr_allow: the tool did not run with updatedInput: $R"
fi
# a PreToolUse block comes first: the PermissionRequest hook does not run
rm -f "$TMP/pr_ran"
PR_AFTER=$(printf '{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo PRE-BLOCKS >&2; exit 2"}]}], "PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "touch %s"}]}]}}' "$TMP/pr_ran")
if run_case pr_after "$(tool_script 'ls' 'PRE-BLOCKS')" "list" "$PR_AFTER"; then
    [ -e "$TMP/pr_ran" ] && fail "pr_after: the PermissionRequest hook ran after a PreToolUse block"
fi
# a PermissionRequest hook that cannot start blocks the call (guard_failure "block")
PR_NOEXEC='{"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/nonexistent/pr-bin", "args": ["x"]}]}]}}'
if run_case pr_noexec "$(tool_script 'ab' 'cannot execute')" "go" "$PR_NOEXEC"; then
    R=$(event_line "$LOG" tool/result)
    printf '%s' "$R" | grep -q '"is_error": *true' || fail "pr_noexec: the call ran: $R"
    printf '%s' "$R" | grep -q 'PermissionRequest hook `[^`]*pr-bin[^`]*` could not start: cannot execute /nonexistent/pr-bin: No such file or directory' ||
        fail "pr_noexec: the reason: $R"
fi
# deny with interrupt:true denies the call and ends the turn (blocked, its message)
PR_INT='{"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"PR-STOP\",\"interrupt\":true}}}'"'"'"}]}]}}'
start_mock '{"requests":[{"tool_calls":[{"id":"call_1","name":"Bash","arguments":"{\"command\":\"ls\"}"}]},{"text":"went on."}]}'
write_config "$TMP/pr_interrupt.json" "" "$BASH_TOOL$(hooks_row "$PR_INT")"
timeout 60 "$WEIR" run -c "$TMP/pr_interrupt.json" -s pr_interrupt --json "list" > "$TMP/pr_interrupt.out" 2> "$TMP/pr_interrupt.err"
stop_mock
LOG="$TMP/sessions/pr_interrupt.jsonl"
"$WEIR" log "$LOG" --check > "$TMP/pr_interrupt.check" 2>&1 || fail "pr_interrupt: weir log --check: $(cat "$TMP/pr_interrupt.check")"
event_line "$LOG" tool/result | grep -q 'PR-STOP' || fail "pr_interrupt: the call was not denied"
event_line "$LOG" turn/end | grep -q '"kind": *"blocked".*PR-STOP' || fail "pr_interrupt: the turn did not end: $(event_line "$LOG" turn/end)"
[ "$(count_events "$LOG" assistant/message)" = 1 ] || fail "pr_interrupt: the turn went on"
grep -q 'Sanitizer\|runtime error' "$TMP/pr_interrupt.err" && fail "pr_interrupt: sanitizer report: $(cat "$TMP/pr_interrupt.err")"
# a bad guard_failure is a load error naming the key
write_config "$TMP/badgf.json" "" "$BASH_TOOL$(hooks_row '{"guard_failure": "maybe", "hooks": {}}')"
timeout 60 "$WEIR" run -c "$TMP/badgf.json" -s badgf "hi" > "$TMP/badgf.out" 2> "$TMP/badgf.err"
RC=$?
[ "$RC" != 0 ] || fail "badgf: weir run accepted guard_failure \"maybe\""
grep -q 'guard_failure' "$TMP/badgf.err" || fail "badgf: the error does not name the key: $(cat "$TMP/badgf.err")"

[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo "hooks-shell: all cases passed"
