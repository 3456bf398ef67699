#!/bin/sh
# run.sh BUILD SOURCE WORK: installs the build to WORK/prefix, checks the
# shared library's SONAME and symbol versions, and builds and runs C
# consumers from the installed prefix only: through find_package (shared
# library, static library, a plugin library), and through pkg-config.
# The shipped caches: installed to share/convtune/caches and in the Python
# package's files, and found there by default by the installed library,
# the installed tool and the package's library.
set -eu
build=$1 source=$2 work=$3
rm -rf "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }
lib=$(ls "$prefix"/lib*/libconvtune.so.*.*.* "$prefix"/lib/*/libconvtune.so.*.*.* 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "no versioned libconvtune.so installed"; exit 1; }
# SONAME libconvtune.so.0.MINOR before 1.0 (a minor release may change the ABI).
soname=$(sed -n 's/^#define CONVTUNE_VERSION_MINOR \([0-9]*\)$/libconvtune.so.0.\1/p' "$source/include/convtune.h")
readelf -d "$lib" | grep -q "SONAME.*\[$soname\]" || { echo "$lib: SONAME is not $soname"; exit 1; }
nm -D --defined-only "$lib" | grep -q " conv_plan_create@@CONVTUNE_0$" || { echo "$lib: symbols not versioned"; exit 1; }
[ -x "$prefix/bin/convtune" ] && [ -f "$prefix/include/convtune.h" ] || { echo "tool or header missing"; exit 1; }

# The shipped caches' directory, and a cache dropped in it found by the
# installed tool (static library: from its bin/) by default.  An empty
# file is an empty cache; the search lists it whatever it holds.
unset CONVTUNE_SYSTEM_CACHE
export XDG_DATA_DIRS=/nonexistent-convtune-test
caches=$prefix/share/convtune/caches
[ -f "$caches/README.md" ] || { echo "$caches/README.md not installed"; exit 1; }
: > "$caches/zz-install-test.db"
"$prefix/bin/convtune" version | grep -qxF "  $caches/zz-install-test.db" \
  || { echo "the installed tool does not find $caches/zz-install-test.db:"; "$prefix/bin/convtune" version; exit 1; }

cmake -S "$source/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
for program in consumer_shared consumer_static consumer_plugin; do
  "$work/consumer/$program" > "$work/$program.out" || { cat "$work/$program.out"; echo "$program failed"; exit 1; }
done
# The installed shared library finds them from its own folder (the static
# consumer, built outside the prefix, has none beside it).
for program in consumer_shared consumer_plugin; do
  grep -qxF "system cache: $caches/zz-install-test.db" "$work/$program.out" \
    || { cat "$work/$program.out"; echo "$program: the installed caches not found"; exit 1; }
done

# The Python package's files (pip install .): convtune/caches beside
# convtune/libconvtune.so, found by that library.
wheel=$work/wheel
cmake --install "$build" --prefix "$wheel" --component python > "$work.wheel.log" 2>&1 || { cat "$work.wheel.log"; exit 1; }
[ -f "$wheel/convtune/caches/README.md" ] || { echo "convtune/caches/README.md not in the package"; exit 1; }
: > "$wheel/convtune/caches/wheel-test.db"
if command -v python3 > /dev/null; then
  python3 - "$wheel/convtune/libconvtune.so" "$wheel/convtune/caches/wheel-test.db" <<'EOF' || exit 1
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
found = []
callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p)(
    lambda path, named, user: found.append(path.decode()) or 0)
message = ctypes.create_string_buffer(512)
status = lib.conv_system_cache_files(None, callback, None, message, len(message))
if status != 0 or sys.argv[2] not in found:
    sys.exit(f"the package's library finds {found} (status {status}: {message.value!r}), not {sys.argv[2]}")
EOF
fi

pc=$(dirname "$lib")/pkgconfig
[ -d "$pc" ] || pc=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH="$pc"
[ "$(pkg-config --modversion convtune)" = "$(sed -n 's/^Version: //p' "$pc/convtune.pc")" ]
# shellcheck disable=SC2046  # one word per flag
cc -std=c11 -o "$work/consumer_pkgconfig" "$source/tests/install/consumer.c" \
  $(pkg-config --cflags --libs convtune) -Wl,-rpath,"$(pkg-config --variable=libdir convtune)"
"$work/consumer_pkgconfig"
# The static library through pkg-config --static: the archive by path
# (-lconvtune would take the shared one), then what it needs, with a
# run path to each of their directories.
libdir=$(pkg-config --variable=libdir convtune)
static_libs=$(pkg-config --static --libs convtune | sed 's/-lconvtune\( \|$\)/ /')
rpaths=""
for flag in $static_libs; do
  case $flag in
    -L*) rpaths="$rpaths -Wl,-rpath,${flag#-L}" ;;
    /*.so) rpaths="$rpaths -Wl,-rpath,$(dirname "$flag")" ;;
  esac
done
# shellcheck disable=SC2046,SC2086
cc -std=c11 -o "$work/consumer_pkgconfig_static" "$source/tests/install/consumer.c" \
  $(pkg-config --cflags convtune) "$libdir/libconvtune.a" $static_libs $rpaths
"$work/consumer_pkgconfig_static"
echo "installed, and 5 consumers built and ran from $prefix"
