#!/bin/sh
# floors.sh SRC -- the house's floors (docs/layout.md): each folder's
# sources include only the public header, their own folder and the floors
# below it:
#   core/ (ground) < cache/, algorithms/ (side by side) < tuner/ < runtime/
# algorithms/common/ includes no family; tools/ and python/ include the
# public header alone from the library.  Prints every include that breaks
# a rule and fails if there is one.
set -eu
src=$1
cd "$src"

rank() {
  case $1 in
    include/*) echo 0 ;;
    core/*) echo 1 ;;
    cache/* | algorithms/*) echo 2 ;;
    tuner/*) echo 3 ;;
    runtime/*) echo 4 ;;
    *) echo 9 ;;
  esac
}

bad=0
complain() {
  echo "floors: $1"
  bad=1
}

for file in $(git ls-files 'core/*' 'cache/*' 'algorithms/*' 'tuner/*' 'runtime/*' 'tools/*' 'python/*' |
              grep -E '\.(c|h|cu|cuh)$'); do
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
    case $inc in
      convtune.h) continue ;;
      ../*) complain "$file includes $inc: name headers from the repository root"; continue ;;
    esac
    case $file in
      tools/*)
        case $inc in tools/*) ;; *) complain "$file includes $inc: tools use the public API only" ;; esac
        continue ;;
      python/*)
        case $inc in */*) complain "$file includes $inc: the binding uses the public API only" ;; esac
        continue ;;
    esac
    case $inc in
      */*) ;;
      *) complain "$file includes \"$inc\": name headers from the repository root"; continue ;;
    esac
    from=$(rank "$file")
    to=$(rank "$inc")
    if [ "$to" -gt "$from" ]; then
      complain "$file includes $inc, a higher floor"
    elif [ "$to" -eq "$from" ] && [ "${file%%/*}" != "${inc%%/*}" ]; then
      complain "$file includes $inc: cache/ and algorithms/ stand side by side"
    fi
    case $file in
      algorithms/common/*)
        case $inc in
          algorithms/common/* | algorithms/algorithm.h) ;;
          algorithms/*) complain "$file includes $inc: common/ serves the families, not one of them" ;;
        esac ;;
    esac
  done
done
[ $bad -eq 0 ] && echo "floors: every include runs down the floors"
exit $bad
