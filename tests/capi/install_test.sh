#!/usr/bin/env bash
# Installs the build into a fresh prefix (cmake --install) and, when MLC_DEB_DIR names a folder
# of built .debs, also unpacks them (dpkg -x) into another; against each tree it builds and runs
#   - an external C program with pkg-config (tests/capi/external/validate.c),
#   - an external C++ program with find_package(mlc_manifest CONFIG) (tests/capi/external/),
#   - `import mlc_manifest` under /usr/bin/python3 from the installed Python package,
# each validating the shipped Gemma example and binding it to its compiled-program.json. The C
# program must load the image module installed beside the library; every module must be installed
# there, and the installed CLI, library and Python module must not link (DT_NEEDED) what the
# modules hold (libcrypto, libsentencepiece and protobuf, libsndfile, soxr, libvips, cpp-httplib).
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
example=$src/examples/gemma-4-E2B-it-q4f16_1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 -c "
from PIL import Image
import math, struct, wave
Image.new('RGB', (20, 12), (200, 30, 90)).save('$work/red.png')
w = wave.open('$work/tone.wav', 'wb')
w.setnchannels(1); w.setsampwidth(2); w.setframerate(44100)
w.writeframes(b''.join(struct.pack('<h', int(8000 * math.sin(i / 7))) for i in range(4410)))
w.close()"

# Runs the three programs against an installed tree: $1 the tree, $2 its library folder.
check_tree() {
  local root=$1 libdir=$2 name=$3
  echo "== $name: $root"
  local pc_dir=$libdir/pkgconfig
  [ -f "$pc_dir/mlc-manifest.pc" ] || { echo "no mlc-manifest.pc in $pc_dir" >&2; return 1; }
  # C with pkg-config
  # shellcheck disable=SC2046
  cc -std=c99 -Wall -Wextra -Werror -o "$work/$name-validate" "$src/tests/capi/external/validate.c" \
    $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs mlc-manifest)
  LD_DEBUG=libs LD_LIBRARY_PATH=$libdir "$work/$name-validate" "$example" \
    "$example/compiled-program.json" "$work/red.png" >"$work/$name-c.out" 2>"$work/$name-c.err" ||
    { cat "$work/$name-c.out" "$work/$name-c.err" >&2; return 1; }
  grep -v "^ *[0-9]*:" "$work/$name-c.out"
  grep -q "^executor generation" "$work/$name-c.out"
  grep -q "^image 8x8" "$work/$name-c.out"
  # The library and the image module came from the installed tree.
  grep -q "calling init: $libdir/libmlc_manifest.so.1\$" "$work/$name-c.err" ||
    { echo "libmlc_manifest.so.1 not loaded from $libdir" >&2; return 1; }
  grep -q "calling init: $libdir/mlc_manifest/libmlc_manifest_image.so\$" "$work/$name-c.err" ||
    { echo "the image module was not loaded from $libdir/mlc_manifest" >&2; return 1; }
  # The other modules are installed beside the image module.
  for module in audio resampler http crypto sentencepiece; do
    [ -f "$libdir/mlc_manifest/libmlc_manifest_$module.so" ] ||
      { echo "no $libdir/mlc_manifest/libmlc_manifest_$module.so" >&2; return 1; }
  done
  # C++ with find_package
  cmake -S "$src/tests/capi/external" -B "$work/$name-cxx" -DCMAKE_PREFIX_PATH="$root" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/$name-cxx" >/dev/null
  LD_LIBRARY_PATH=$libdir "$work/$name-cxx/bind" "$example" "$example/compiled-program.json"
  # Python from the installed package
  local pydir=$root/lib/python3/dist-packages
  if [ -d "$pydir/mlc_manifest" ]; then
    PYTHONPATH=$pydir /usr/bin/python3 -c "
import mlc_manifest, sys
assert mlc_manifest.__file__.startswith('$pydir'), mlc_manifest.__file__
b = mlc_manifest.bind('$example', '$example/compiled-program.json')
print('python: bound', b['executor'], mlc_manifest.__version__)
a = mlc_manifest.decode_image('$work/red.png', 4, 4)
assert a.shape == (1, 4, 4, 3), a.shape
s = mlc_manifest.decode_audio('$work/tone.wav', 16000)
assert s.shape == (1600,), s.shape
"
    # The package links to the installed modules (so a relocated tree finds them).
    for module in image audio resampler http crypto sentencepiece; do
      [ -e "$pydir/mlc_manifest/libmlc_manifest_$module.so" ] ||
        { echo "no link to the $module module in $pydir/mlc_manifest" >&2; return 1; }
    done
  else
    echo "python: no package in $pydir (built without pybind11?)" >&2
    return 1
  fi
  # What the modules hold stays out of the installed binaries' DT_NEEDED.
  local binary
  for binary in "$root/bin/mlc-manifest" "$libdir/libmlc_manifest.so.1" "$pydir"/mlc_manifest/_core*.so; do
    [ -f "$binary" ] || { echo "no $binary" >&2; return 1; }
    if readelf -d "$binary" | grep "(NEEDED)" |
        grep -E "\[lib(crypto|ssl|sentencepiece|protobuf|sndfile|soxr|vips|cpp-httplib)"; then
      echo "$binary links a library that belongs in a module (above)" >&2
      return 1
    fi
  done
  echo "$name: no module library in the DT_NEEDED of the CLI, libmlc_manifest.so.1 and the Python module"
}

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libmlc_manifest.so.1 | head -1)")
check_tree "$prefix" "$libdir" install

if [ -n "${MLC_DEB_DIR:-}" ]; then
  tree=$work/debs
  for deb in "$MLC_DEB_DIR"/*.deb; do dpkg -x "$deb" "$tree"; done
  check_tree "$tree/usr" "$tree/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)" debs
fi
echo "install_test: passed"
