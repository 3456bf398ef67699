#!/bin/sh
# library_never_prints.sh ARCHIVE: fails if any object of the static library
# ARCHIVE (the library's own code, not the CUDA runtime or the libraries
# linked beside it) refers to the standard streams or to a function that
# writes to them: what the library says goes to the context's log callback
# only (conv_context_options.log).
archive=$1
[ -f "$archive" ] || { echo "no archive $archive"; exit 1; }
nm -A "$archive" 2>/dev/null | awk '
  { split($1, where, ":"); objects[where[2]] = 1 }
  $(NF-1) == "U" && $NF ~ /^(stderr|stdout|printf|vprintf|puts|putchar|perror|psignal|psiginfo|__printf_chk|__vprintf_chk|_ZSt4cerr|_ZSt4cout|_ZSt4clog)(@.*)?$/ {
    print $1 " refers to " $NF; bad++
  }
  END {
    n = 0; for (m in objects) n++
    if (n == 0) { print "no objects found"; exit 1 }
    if (bad == 0) printf "%d objects, none refers to stdout, stderr or a function printing to them\n", n
    exit bad > 0
  }'
