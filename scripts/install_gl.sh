#!/bin/sh
# Install what MuJoCo's headless renderer needs (MUJOCO_GL=egl): glvnd's EGL and OpenGL
# libraries and Mesa's EGL vendor with its software rasteriser (Debian / Ubuntu).
# Idempotent: does nothing when the libraries and Mesa's EGL vendor file are there.
set -eu

have_lib() {
    ldconfig -p 2>/dev/null | grep -q "$1"
}

have_any() {  # any of the given paths (globs) exists
    for p in "$@"; do
        [ -e "$p" ] && return 0
    done
    return 1
}

if have_lib libEGL.so.1 && have_lib libOpenGL.so.0 && have_lib libGL.so.1 \
        && have_any /usr/share/glvnd/egl_vendor.d/*mesa*.json \
        && have_any /usr/lib/*/dri/swrast_dri.so /usr/lib/dri/swrast_dri.so; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_gl.sh: no apt-get here; install EGL (libEGL.so.1, libOpenGL.so.0) and" \
         "Mesa's EGL and DRI drivers, or set MUJOCO_GL=osmesa / glfw" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_gl.sh: needs root (or sudo) to install the EGL / Mesa packages" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends libegl1 libopengl0 libgl1 libegl-mesa0 \
    libgl1-mesa-dri libgbm1 >/dev/null
