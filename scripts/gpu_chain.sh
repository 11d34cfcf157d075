# Sourced by the GPU scripts whose work outlasts one device call (gpu_audit_part.sh,
# gpu_catalog_agreement.sh): a chain of commands in its own process session that later calls
# (PHASE=wait) wait for, on a machine kept warm between calls. The caller sets w (a folder that
# stays on the machine), phase (now, start or wait) and t0 (its start, in $SECONDS), and defines
# copy_back (what each call sends back into $OUT).

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
