#!/usr/bin/env bash
# The completion scripts `scaleplan completion bash|zsh` prints, driven in real shells. bash: the
# script registers _scaleplan (complete -p) and, with COMP_WORDS/COMP_CWORD set as bash sets them,
# offers every command `scaleplan --help` lists, each command's options, the bundled presets,
# profiles and validation sets, the choices of choice options, and files. zsh (when installed):
# the script parses (zsh -n), registers itself both sourced after compinit and autoloaded from
# $fpath, and TAB in an interactive zsh offers commands, options, presets, profiles, choices and
# sets (zsh_complete.zsh). ctest label `install`.
# Usage: check_completion.sh SCALEPLAN_BINARY SOURCE_DIR
set -uo pipefail
sp=$1 src=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sp" completion bash >"$tmp/scaleplan.bash" || { echo "FAIL: completion bash" >&2; exit 1; }
"$sp" completion zsh >"$tmp/_scaleplan" || { echo "FAIL: completion zsh" >&2; exit 1; }

# The commands of `scaleplan --help` (its Subcommands: section), and a few file names to complete.
commands=$("$sp" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }')
[ -n "$commands" ] || { echo "FAIL: no commands in scaleplan --help" >&2; exit 1; }
mkdir "$tmp/files" && touch "$tmp/files/config.json" "$tmp/files/records.json"

bash --norc --noprofile -s "$tmp" "$commands" "$src" <<'BASH'
tmp=$1 commands=$2 src=$3
source "$tmp/scaleplan.bash"
fail=0
complete -p scaleplan | grep -q -- '-F _scaleplan scaleplan' || { echo "FAIL: complete -p" >&2; fail=1; }
# What _scaleplan offers for the words given (the last one is being completed), one a line.
offers() {
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _scaleplan
  printf '%s\n' "${COMPREPLY[@]}"
}
expect() {  # expect WORD scaleplan ARGS...: WORD is among the offers
  local want=$1; shift
  offers "$@" | grep -qxF -- "$want" ||
    { echo "FAIL: '$*' does not offer '$want'; offers: $(offers "$@" | tr '\n' ' ')" >&2; fail=1; }
}
refuse() {  # refuse WORD scaleplan ARGS...: WORD is not among the offers
  local no=$1; shift
  ! offers "$@" | grep -qxF -- "$no" ||
    { echo "FAIL: '$*' offers '$no'" >&2; fail=1; }
}
for c in $commands; do expect "$c" scaleplan ""; done
expect plan scaleplan pl
refuse model scaleplan pl
expect --model scaleplan plan --mo
expect --json scaleplan plan --js
refuse --trace scaleplan plan --tr    # simulate's option, not plan's
expect --trace scaleplan simulate --tr
for preset in "$src"/models/presets/llama3-*.json; do
  expect "$(basename "$preset" .json)" scaleplan plan --model llama3-
done
expect llama3-8b scaleplan memory -m llama3-
expect llama3-8b scaleplan plan --model = llama3-   # --model=llama3- as bash splits it
expect llama3-8b scaleplan plan --model =
expect --gbs scaleplan plan --model = llama3-8b --gb
expect dgx-h100 scaleplan plan --cluster dgx-
expect dgx-h100 scaleplan plan -c dgx-
expect "$tmp/files/config.json" scaleplan plan --model "$tmp/files/con"
refuse llama3-8b scaleplan plan --cluster llama3-
# Options with their values before the word: the command path stays `plan`.
expect --gbs scaleplan plan --model llama3-8b --cluster dgx-h100 --gpus 8 --gb
expect nanotron scaleplan plan --model llama3-8b --framework nano
expect megatron-2022 scaleplan memory --framework megatron-
refuse megatron-2022 scaleplan plan --framework megatron-   # plan takes current frameworks only
expect cuda scaleplan profile --backend c
refuse llama3-8b scaleplan plan --seq llama3-   # a count: nothing to complete
# Subcommands and positionals.
expect list scaleplan cluster l
expect show scaleplan cluster s
expect hgx-h200 scaleplan cluster show hgx-
expect dev_runs_2026 scaleplan validate dev_
refuse component_figures scaleplan validate comp    # component figures, not run records
expect "$tmp/files/records.json" scaleplan validate "$tmp/files/rec"
expect dev_runs scaleplan memory --validate dev_
expect --how-sure scaleplan validate dev_runs --how
expect zsh scaleplan completion z
exit $fail
BASH
fail=$?

if command -v zsh >/dev/null; then
  zsh -n "$tmp/_scaleplan" || { echo "FAIL: zsh -n _scaleplan" >&2; fail=1; }
  zsh -f -c "autoload -Uz compinit && compinit -u -D -d '$tmp/zcd' && source '$tmp/_scaleplan' &&
    [[ \$_comps[scaleplan] == _scaleplan_cmd ]] && (( \$+functions[_scaleplan_cmd_plan] ))" ||
    { echo "FAIL: zsh: sourced after compinit, _scaleplan_cmd completes scaleplan" >&2; fail=1; }
  mkdir "$tmp/fpath" && cp "$tmp/_scaleplan" "$tmp/fpath/"
  zsh -f -c "fpath=('$tmp/fpath' \$fpath); autoload -Uz compinit && compinit -u -D -d '$tmp/zcd2' &&
    [[ \$_comps[scaleplan] == _scaleplan ]]" ||
    { echo "FAIL: zsh: autoloaded from \$fpath, _scaleplan completes scaleplan" >&2; fail=1; }
  # TAB pressed in an interactive zsh (tests/install/zsh_complete.zsh): what it offers.
  zexpect() {  # zexpect WORD LINE: WORD is among the matches for LINE
    local got
    got=$(timeout 60 zsh -f "$here/zsh_complete.zsh" "$tmp/fpath" "$2")
    grep -qxF -- "$1" <<<"$got" ||
      { echo "FAIL: zsh: '$2' does not offer '$1'; offers: $(tr '\n' ' ' <<<"$got")" >&2; fail=1; }
  }
  zexpect plan 'scaleplan pl'
  zexpect --model 'scaleplan plan --mo'
  zexpect llama3-8b 'scaleplan plan --model llama3-'
  zexpect dgx-h100 'scaleplan plan --gpus 8 --cluster dgx-'
  zexpect nanotron 'scaleplan simulate --framework nano'
  zexpect hgx-h200 'scaleplan cluster show hgx'
  zexpect dev_runs_2026 'scaleplan validate dev'
else
  echo "note: zsh is not installed (scripts/setup.sh installs it): the zsh script was not checked" >&2
fi
[ $fail = 0 ] && echo "completion: ok"
exit $fail
