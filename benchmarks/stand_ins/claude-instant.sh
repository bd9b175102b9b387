#!/bin/sh
# claude-sleeps.sh without the sleep: a real agent process that answers at once, so a rollout's wall
# time is the harness's own (private home, process group, event stream, the sandbox when sealed).
[ "$1" = --version ] && echo "0.0.0 (skilltune benchmark stand-in)" && exit 0
echo '{"type":"system","subtype":"init","model":"stand-in","tools":[]}'
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","usage":{"input_tokens":10,"output_tokens":2}}'
