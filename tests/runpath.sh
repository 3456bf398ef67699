#!/bin/sh
# runpath.sh [--skip NAME]... PATH...: fails if any ELF file under the PATHs
# (files or folders, walked; symbolic links are not followed) has an
# RPATH or RUNPATH entry that is empty or relative.  The dynamic loader
# reads an empty entry ("::", or a leading or trailing ":") as the current
# directory and a relative one as relative to it, so either lets whoever can
# write to the directory a program or Python starts in supply its libraries.
# Only absolute entries and ones starting with $ORIGIN pass.  --skip NAME
# leaves out folders of that name (another test's scratch space, written
# while this one runs).
prune=""
while [ "${1-}" = --skip ]; do
  prune="$prune -name $2 -prune -o"
  shift 2
done
[ $# -gt 0 ] || { echo "usage: runpath.sh [--skip NAME]... PATH..."; exit 2; }
for path in "$@"; do
  [ -e "$path" ] || { echo "no $path"; exit 1; }
done
elf=$(printf '\177ELF')
checked=0 bad=0
# Executables, shared libraries and Python modules are what carry a run path.
# shellcheck disable=SC2086  # $prune is a list of find's words
files=$(find "$@" $prune -type f \( -perm -u=x -o -name '*.so' -o -name '*.so.*' \) -print) || exit 1
# File names with a newline in them are not ours to check.
IFS='
'
for file in $files; do
  [ "$(head -c 4 "$file")" = "$elf" ] || continue
  checked=$((checked + 1))
  # "0x... (RUNPATH)  Library runpath: [a:b]": "[a:b]", brackets kept so
  # that an empty run path is a line too.
  paths=$(readelf -d "$file" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*: \(\[.*\]\)$/\2/p')
  for list in $paths; do
    list=${list#[} list=${list%]} why=""
    # A trailing ":" is an empty last entry, which splitting on ":" drops;
    # an empty run path is one empty entry.
    case $list in ''|*:) why="an empty entry" ;; esac
    IFS=:
    for entry in $list; do
      # shellcheck disable=SC2016  # $ORIGIN is the loader's, not the shell's
      case $entry in
        '') why="an empty entry" ;;
        /*|'$ORIGIN'|'$ORIGIN/'*|'${ORIGIN}'|'${ORIGIN}/'*) ;;
        *) why="the relative entry '$entry'" ;;
      esac
    done
    IFS='
'
    [ -z "$why" ] || { echo "$file: run path [$list] has $why"; bad=$((bad + 1)); }
  done
done
[ "$checked" -gt 0 ] || { echo "no ELF file found under $*"; exit 1; }
[ "$bad" -eq 0 ] || { echo "FAIL: $bad run paths with an empty or relative entry ($checked ELF files checked)"; exit 1; }
echo "$checked ELF files checked: every run path entry is absolute or \$ORIGIN-based"
