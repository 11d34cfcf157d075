# Sourced by the GPU scripts whose work outlasts one device call (gpu_audit_part.sh,
# gpu_catalog_agreement.sh): a chain of commands in its own process session that later calls
# (PHASE=wait) wait for, on a machine kept warm between calls. The caller sets root (the
# repository) before sourcing this, and defines copy_back (what each call sends back into $OUT).
# Sets phase ($PHASE: now, start or wait), w (a folder ignored by git that stays on the machine
# between calls), logs ($LOG_DIR, default gpu-logs) and t0 (the start, in $SECONDS).
phase=${PHASE:-now}
w="$root/audit-parts"
logs=${LOG_DIR:-$root/gpu-logs}
mkdir -p "$w" "$logs"
t0=$SECONDS

# start_chain SCRIPT: runs SCRIPT (bash), here (PHASE=now) or in the background (PHASE=start),
# its output in $w/chain.log. SCRIPT touches $w/chain.done at its end.
start_chain() {
  : >"$w/chain.log" # (before the chain starts: wait_chain must not race its redirection)
  if [ "$phase" = now ]; then
    bash -c "$1" >>"$w/chain.log" 2>&1
  else
    setsid bash -c "$1" </dev/null >>"$w/chain.log" 2>&1 &
  fi
}

# wait_chain: up to WAIT_S seconds (default 560) since t0 for the chain's end, then copy_back.
wait_chain() {
  # A fresh machine (the last one was released between calls) has nothing to wait for: say so at
  # once rather than spend the call's device time waiting.
  [ -f "$w/chain.log" ] || { echo "nothing started on this machine (PHASE=start first)"; return 1; }
  while [ ! -f "$w/chain.done" ] && [ $((SECONDS - t0)) -lt "${WAIT_S:-560}" ]; do sleep 5; done
  copy_back
  [ -f "$w/chain.done" ] || echo "still running: call again with PHASE=wait"
}
