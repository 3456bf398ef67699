#!/bin/sh
# instrumented.sh ARCHIVE: fails unless every C object in the static
# library ARCHIVE calls into AddressSanitizer, and the library as a whole
# into UndefinedBehaviorSanitizer (objects with nothing for UBSan to check
# have no such call, so that one is counted over the archive).
archive=$1
[ -f "$archive" ] || { echo "no archive $archive"; exit 1; }
nm -A "$archive" 2>/dev/null | awk -v archive="$archive" '
  { split($1, where, ":"); member = where[2] }
  member ~ /\.c\.o$/ { objects[member] = 1 }
  member ~ /\.c\.o$/ && / U __asan_/ { asan[member] = 1 }
  / U __ubsan_handle_/ { ubsan++ }
  END {
    n = 0; bad = 0
    for (m in objects) { n++; if (!(m in asan)) { print "not instrumented by ASan: " m; bad++ } }
    if (n == 0) { print archive ": no C objects found"; exit 1 }
    if (ubsan == 0) { print archive ": no UBSan checks at all"; exit 1 }
    printf "%d C objects instrumented by ASan, %d UBSan check calls\n", n - bad, ubsan
    exit bad > 0
  }'
