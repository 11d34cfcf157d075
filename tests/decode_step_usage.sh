#!/usr/bin/env bash
# kg_bench_decode_step's --gemv sets refused before anything runs (no GPU needed): exit 2 and one
# line naming the item and what is wrong with it.
set -u
bench=$1
fail=0
expect_refusal() { # expected text, then the arguments
  local want=$1
  shift
  local out rc
  out=$("$bench" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" <<<"$out" || [ "$(wc -l <<<"$out")" -ne 1 ]; then
    echo "FAIL: $* -> exit $rc, '$out' (want exit 2 and one line with '$want')"
    fail=1
  fi
}
expect_refusal "cannot read 'qkv@1=simt:2,4,2'" --gemv 'qkv@1=simt:2,4,2'
expect_refusal "cannot read 'gate_up=simt:2,4,2,1'" --gemv 'qkv@1=simt:2,4,2,1+gate_up=simt:2,4,2,1'
expect_refusal "cannot read 'qkv@x=simt:2,4,2,1'" --gemv 'qkv@x=simt:2,4,2,1'
expect_refusal "qkvx@1: no such projection" --gemv 'qkvx@1=simt:2,4,2,1'
expect_refusal "down@8: the batches run are 1..4" --batches 1,4 --gemv 'down@8=simt:2,4,2,1'
expect_refusal "qkv@1: launch_gemv_bf16 does not run sweep:9,8,2,1" --gemv 'qkv@1=sweep:9,8,2,1'
expect_refusal "o_proj@64: launch_gemv_bf16 does not run wgmma_sw:112,4,4,2,1" --batches 64 \
  --gemv 'o_proj@64=wgmma_sw:112,4,4,2,1'
[ $fail -eq 0 ] && echo "kg_bench_decode_step: every bad --gemv set refused with exit 2"
exit $fail
