# Prints, one a line, the matches zsh's completion system offers for the command line $2 with TAB
# pressed at its end, the folder $1 (holding _scaleplan) first in $fpath: an interactive zsh in a
# pseudo-terminal (zsh/zpty), compinit, and a compadd wrapper that prints every match it is given
# (the technique of zsh-capture-completion). Used by check_completion.sh.
zmodload zsh/zpty || exit 2
zpty z zsh -f -i
zpty -w z "PROMPT=''; fpath=('$1' \$fpath); autoload -Uz compinit; compinit -u -D -d '$1/.zcompdump'"
zpty -w z 'compadd () {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  typeset -a __hits
  builtin compadd -A __hits "$@"
  local ret=$?
  (( $#__hits == 0 )) && return $ret
  local h; for h in $__hits; do echo -E - "<<""M>>$h"; done
  builtin compadd -Q -U ""
}'
# TAB runs complete-word and then prints a marker, from the same widget: everything before the
# marker is the completion's output, however slow the machine. (Typing more keys after the TAB to
# echo a marker left them pending while the completion ran, and zsh's completion functions give up
# early on pending input: under load the matches were sometimes missing.)
zpty -w z 'complete-and-mark () { zle complete-word; print -n "<<D""ONE>>" }'
zpty -w z "zle -N complete-and-mark; bindkey '^I' complete-and-mark; unsetopt autolist; echo RE''ADY"
zpty -r z setup '*READY*' || exit 2  # compinit done (its dump written) before TAB is pressed
zpty -n -w z "$2"$'\t'
zpty -r z out '*<<DONE>>*' || exit 2
zpty -d z
for line in ${(f)out}; do
  [[ $line == *'<<M>>'* ]] && print -r -- "${${line##*<<M>>}%%$'\r'*}"
done
