#!/usr/bin/env python3
# A PreToolUse validator for the Bash tool in the shape of Claude Code's
# official example (anthropics/claude-code examples/hooks/
# bash_command_validator_example.py): written for weir's tests, not a copy.
# Input: the hook JSON on stdin.  Exit 2 with the issues on stderr blocks
# the call (the model reads them); exit 1 is a non-blocking error.
import json
import re
import sys

RULES = (
    (re.compile(r"^grep\b(?!.*\|)"), "Use 'rg' (ripgrep) instead of 'grep'"),
    (re.compile(r"^find\s+\S+\s+-name\b"), "Use 'rg --files -g PATTERN' instead of 'find -name'"),
)


def issues_of(command):
    return [text for rule, text in RULES if rule.search(command)]


def main():
    try:
        event = json.load(sys.stdin)
    except ValueError as exc:
        sys.stderr.write("bad hook input: %s\n" % exc)
        return 1
    if event.get("tool_name") != "Bash":
        return 0
    command = (event.get("tool_input") or {}).get("command") or ""
    found = issues_of(command)
    for text in found:
        sys.stderr.write("\u2022 %s\n" % text)
    return 2 if found else 0


if __name__ == "__main__":
    sys.exit(main())
