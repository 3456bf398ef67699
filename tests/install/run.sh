#!/bin/sh
# run.sh BUILD SOURCE WORK: installs the build to WORK/prefix, checks the
# shared library's SONAME and symbol versions, and builds and runs C
# consumers from the installed prefix only: through find_package (shared
# library, static library, a plugin library), and through pkg-config.
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

cmake -S "$source/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
for program in consumer_shared consumer_static consumer_plugin; do
  "$work/consumer/$program" || { echo "$program failed"; exit 1; }
done

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
