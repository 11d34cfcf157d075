#!/usr/bin/env bash
# On the GPU machine: the example outside checker (examples/kernelbench_checker) through
# `audit checker --cmd` against `--protocol kernelbench` on the mutants of AGREE_TASKS (a regex),
# then `audit agreement`. AGREE_PROTOCOLS: the built-in protocols run beside the witnesses (default
# kernelbench, the one compared; "all" for every one). Reuses audit-ab/agree (gpu_audit_ab.sh, CMD=1) when it is there.
# Logs and the agreement into $OUT (the --cmd audit's verdicts copied there as it goes: streamed
# verdicts survive a call cut short).
# DEADLINE: seconds this script may take in all; the --cmd audit is stopped in time for the
# agreement to be computed on the verdicts it has streamed.
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
started=$(date +%s)
T=${AGREE_TASKS:-'^(relu|gelu_tanh|softmax_lastdim|layernorm_affine_fp32|sum_lastdim|silu|abs_fp32)$'}
state=$(nvidia-smi --query-gpu=name,temperature.gpu,utilization.gpu,memory.used --format=csv,noheader)
echo "$state"
case "$state" in *"requires reset"*) echo "the GPU needs a reset: nothing run"; exit 3 ;; esac
ps -eo pid,etime,cmd | grep -E "kg_worker|kernelgate" | grep -v grep | head -5
BUILD_TARGET=kernelgate source scripts/gpu_build.sh || exit 1
cd "$root"
kg="$BUILD_DIR/suite/kernelgate"; w="$root/audit-ab"
if [ ! -f "$w/agree/witnesses.jsonl" ]; then
  "$kg" mutants generate --out "$w/sample" >/dev/null 2>&1
  s=$SECONDS; "$kg" audit checker --protocol "${AGREE_PROTOCOLS:-kernelbench}" --catalog "$w/sample" --tasks "$T" --no-progress --out "$w/agree" > "$OUT/agree.log" 2>&1
  echo "protocols: exit $? in $((SECONDS-s)) s"; grep -E "^(compile|witness|every)" "$OUT/agree.log"
fi
# Each step's files into $OUT as soon as it ends: a call cut short keeps what was done.
cp "$w/agree/verdicts.jsonl" "$OUT/verdicts-agree.jsonl"; cp "$w/agree/summary.json" "$OUT/agree-summary.json"
cp "$w/agree/kill_matrix.json" "$OUT/agree-kill_matrix.json"
s=$SECONDS
# The --cmd audit's folder stays off $OUT (its per-call workdirs would flood what comes back);
# its verdicts are copied there every 15 s and at the end, so a call cut short keeps them.
(while sleep 15; do cp "$w/cmd/verdicts.jsonl" "$OUT/verdicts-cmd.jsonl" 2>/dev/null; done) &
copier=$!
left=$(( ${DEADLINE:-1000000} - ($(date +%s) - started) - 30 ))
timeout "$left" "$kg" audit checker --cmd "python3 $root/examples/kernelbench_checker/checker.py {task} {candidate} {workdir}" --catalog "$w/sample" --tasks "$T" --witnesses "$w/agree/witnesses.jsonl" --jobs 12 --timeout 240 --no-progress --out "$w/cmd" > "$OUT/cmd.log" 2>&1
echo "cmd: exit $? in $((SECONDS-s)) s (limit $left s)"; tail -12 "$OUT/cmd.log"
kill $copier 2>/dev/null; cp "$w/cmd/verdicts.jsonl" "$OUT/verdicts-cmd.jsonl"
cp "$w/cmd/summary.json" "$OUT/cmd-summary.json" 2>/dev/null
"$kg" audit agreement "$w/agree" "$w/cmd" --checkers kernelbench,cmd --json "$OUT/agreement.json" > "$OUT/agreement.txt" 2>&1
echo "agreement: exit $?"; head -60 "$OUT/agreement.txt"
