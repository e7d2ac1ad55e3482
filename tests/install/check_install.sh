#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, moved elsewhere afterwards, then the installed binary
# run with SCALEPLAN_DATA_DIR unset and, where a mount namespace can be made (unshare), the source
# tree hidden behind an empty folder: it must find its data beside itself (<prefix>/share/scaleplan)
# and say so in --version; model, plan (with an export, which reads export/frameworks), cluster
# and validate (a bundled set by name) must work; with the installed data gone it must fail with
# exit 2 and an error naming the places searched. ctest label `install`.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1 src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset SCALEPLAN_DATA_DIR
fail=0
check() {  # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }
# Moved after installing: nothing of the install step's prefix may be baked in either.
mv "$tmp/prefix" "$tmp/moved"
p=$(realpath "$tmp/moved")
for f in bin/scaleplan share/scaleplan/models/presets/llama3-8b.json \
  share/scaleplan/hw_profiles/bundled/dgx-h100.json share/scaleplan/export/frameworks/megatron-lm.json \
  share/scaleplan/validation/dev_runs_2026.json share/scaleplan/validation/README.md \
  share/bash-completion/completions/scaleplan share/zsh/site-functions/_scaleplan; do
  check "installed $f" test -e "$p/$f"
done

# Runs a command with the source tree hidden when a mount namespace is allowed here.
hidden=0
if unshare --mount --map-root-user true 2>/dev/null; then
  hidden=1
  mkdir "$tmp/empty"
fi
run() {
  if [ $hidden = 1 ]; then
    unshare --mount --map-root-user sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
      sh "$tmp/empty" "$src" "$@"
  else
    "$@"
  fi
}
if [ $hidden = 1 ]; then
  check "the source tree is hidden" run sh -c "! test -e '$src/models/presets/llama3-8b.json'"
else
  echo "note: no mount namespace here (unshare): the source tree stays visible; --version must" \
    "still name the installed data" >&2
fi

sp=$p/bin/scaleplan
out=$(run "$sp" --version)
check "--version names the installed data (got: $out)" \
  grep -qxF "data: $p/share/scaleplan (installed beside the executable)" <<<"$out"
out=$(run "$sp" model --model llama3-8b --json)
check "model --model llama3-8b --json (got: ${out:0:300})" grep -q '"llama3-8b"' <<<"$out"
out=$(run "$sp" plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1k --gbs 16 --top 1 -q \
  --emit megatron 2>"$tmp/plan.err")
check "plan --emit megatron (got: ${out:0:300})" grep -q 'pretrain_gpt.py' <<<"$out"
out=$(run "$sp" cluster show hgx-h200 --json)
check "cluster show hgx-h200 --json" grep -q 'H200' <<<"$out"
out=$(run "$sp" validate dev_runs_2026 --match '^dgxc_v250401_llama31_8b_bf16_h100_8gpu$' --json -q)
check "validate dev_runs_2026 by name (got: ${out:0:300})" \
  grep -q "$p/share/scaleplan/validation/dev_runs_2026.json\|dgxc_v250401_llama31_8b" <<<"$out"

# The installed data gone: a clear error naming where it looked.
mv "$p/share/scaleplan" "$p/share/scaleplan.gone"
if [ $hidden = 1 ]; then
  err=$(run "$sp" model --model llama3-8b 2>&1 >/dev/null); rc=$?
  check "missing data: exit 2 (got $rc)" test $rc = 2
  for want in "SCALEPLAN_DATA_DIR (not set)" "$p/share/scaleplan" "$src" "models/presets"; do
    check "missing data: the error names '$want' (got: $err)" grep -qF "$want" <<<"$err"
  done
  out=$(run "$sp" --version)
  check "missing data: --version says so (got: $out)" \
    grep -qxF "data: $src (the source tree of the build; it holds no bundled data)" <<<"$out"
fi
err=$(SCALEPLAN_DATA_DIR=$tmp/nowhere run "$sp" plan --model llama3-8b --cluster dgx-h100 \
  --gpus 8 --seq 1k --gbs 16 2>&1 >/dev/null); rc=$?
check "SCALEPLAN_DATA_DIR without data: exit 2 (got $rc)" test $rc = 2
check "SCALEPLAN_DATA_DIR without data: the error names it (got: $err)" \
  grep -qF "SCALEPLAN_DATA_DIR=$tmp/nowhere" <<<"$err"
# SCALEPLAN_DATA_DIR still wins over everything.
out=$(SCALEPLAN_DATA_DIR=$p/share/scaleplan.gone run "$sp" model --model llama3-8b --json)
check "SCALEPLAN_DATA_DIR pointing at the data" grep -q '"llama3-8b"' <<<"$out"

[ $fail = 0 ] && echo "install: ok (source tree hidden: $hidden)"
exit $fail
