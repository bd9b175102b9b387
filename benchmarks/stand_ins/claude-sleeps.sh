#!/bin/sh
# A stand-in for the claude CLI in benchmarks: a real process that answers after 2 s with a minimal
# claude stream-json transcript, so the harness does all it does for a real CLI (private home,
# minimal environment, process group, event stream, parsing) while the agent's own time is known.
[ "$1" = --version ] && echo "0.0.0 (skilltune benchmark stand-in)" && exit 0
echo '{"type":"system","subtype":"init","model":"stand-in","tools":[]}'
sleep 2
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","usage":{"input_tokens":10,"output_tokens":2}}'
