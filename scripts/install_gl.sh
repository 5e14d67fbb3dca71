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

APT_WHO=install_gl.sh
. "$(dirname "$0")/apt_install.sh"
apt_install libegl1 libopengl0 libgl1 libegl-mesa0 libgl1-mesa-dri libgbm1 >/dev/null
