#!/bin/sh
# registered.sh BINARY NAME...: fails unless BINARY's own test table (what it
# prints when run without arguments) is exactly NAME..., the tests CMake
# registered from reading that table in the source, so that no test can
# silently never run.
binary=$1
shift
table=$("$binary" | sort) || exit 1
registered=$(printf '%s\n' "$@" | sort)
if [ "$table" != "$registered" ]; then
  echo "$binary: its test table and CMakeLists.txt's TESTS differ (< table, > CMake):"
  printf '%s\n' "$table" > "${TMPDIR:-/tmp}/registered.$$.a"
  printf '%s\n' "$registered" > "${TMPDIR:-/tmp}/registered.$$.b"
  diff "${TMPDIR:-/tmp}/registered.$$.a" "${TMPDIR:-/tmp}/registered.$$.b"
  rm -f "${TMPDIR:-/tmp}/registered.$$.a" "${TMPDIR:-/tmp}/registered.$$.b"
  exit 1
fi
