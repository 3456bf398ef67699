#!/bin/sh
# Installs what building convtune needs and this machine lacks, with apt
# (Debian, Ubuntu): SQLite's, libuv's and jansson's development files,
# CMake, and Python's headers and venv where there is a python3 (the
# binding's compiled call path; pip install into a virtual environment).
# Does nothing when all are there.  The CUDA toolkit and cuDNN come from
# NVIDIA, not from here: without nvcc it says so and fails.
# The README's two set-up commands and .ci/run start with it.
set -eu

need=""
[ -f /usr/include/uv.h ] || need="$need libuv1-dev"
[ -f /usr/include/sqlite3.h ] || need="$need libsqlite3-dev"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
command -v cmake >/dev/null 2>&1 || need="$need cmake"
if command -v python3 >/dev/null 2>&1; then
  py_include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)
  { [ -n "$py_include" ] && [ -f "$py_include/Python.h" ]; } || need="$need python3-dev"
  # `python3 -m venv` (pip install into a virtual environment, .ci/run).
  python3 -c 'import ensurepip' 2>/dev/null || need="$need python3-venv"
fi

if [ -n "$need" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: missing$need, and there is no apt-get here: install them" \
         "with this system's package manager" >&2
    exit 1
  fi
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "install-deps: missing$need: run 'apt-get install -y$need' as root" >&2
      exit 1
    fi
    sudo=sudo
  fi
  echo "install-deps: installing$need"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # shellcheck disable=SC2086  # one word per package
  $sudo apt-get install -y -qq $need
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDACXX:-}" ]; then
  echo "install-deps: no CUDA toolkit (nvcc): install CUDA 12.x or 13.x and cuDNN 9 from" \
       "NVIDIA (https://developer.nvidia.com/cuda-downloads), then run this again" >&2
  exit 1
fi
