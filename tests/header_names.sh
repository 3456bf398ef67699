#!/bin/sh
# header_names.sh HEADER MAP: every function the public header names (in
# its declarations and in its comments) is one the library exports (MAP,
# the shared library's version script), and every exported one is named
# in the header, so that the documentation never points at a function
# that does not exist.
header=$1
map=$2
# Function-like macros (conv_problem_init(p) passes sizeof to
# conv_problem_init_sized) are not symbols; the functions they call are.
macros=$(sed -n 's/^#define \(conv_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u)
named=$(grep -o 'conv_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u | grep -vxF "$macros")
exported=$(sed -n 's/^ *\(conv_[a-z0-9_]*\);$/\1/p' "$map" | sort -u)
[ -n "$exported" ] || { echo "$map: no exported names found"; exit 1; }
if [ "$named" != "$exported" ]; then
  echo "named in $header (<) and exported by $map (>) differ:"
  printf '%s\n' "$named" > "${TMPDIR:-/tmp}/header_names.$$.a"
  printf '%s\n' "$exported" > "${TMPDIR:-/tmp}/header_names.$$.b"
  diff "${TMPDIR:-/tmp}/header_names.$$.a" "${TMPDIR:-/tmp}/header_names.$$.b"
  rm -f "${TMPDIR:-/tmp}/header_names.$$.a" "${TMPDIR:-/tmp}/header_names.$$.b"
  exit 1
fi
echo "$(printf '%s\n' "$named" | wc -l) functions, each named in the header and exported"
