#!/bin/sh
# apt_install PACKAGE...: install Debian packages as root or through sudo (sourced by the
# install_*.sh scripts; "$APT_WHO" names the caller in messages).
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "${APT_WHO:-apt_install}: no apt-get here; install $* by hand" >&2
        return 1
    fi
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO="sudo"
        else
            echo "${APT_WHO:-apt_install}: needs root (or sudo) to install $*" >&2
            return 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${APT_UPDATED:-}" ]; then
        $SUDO apt-get update -qq
        APT_UPDATED=1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "$@"
}
