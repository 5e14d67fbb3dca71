#!/bin/sh
# Install headless Chromium and its driver for the browser tests (Debian / Ubuntu).
# Idempotent: does nothing when /usr/bin/chromium and /usr/bin/chromedriver are there.
set -eu

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: no apt-get here; install Chromium and chromedriver so that" \
         "/usr/bin/chromium and /usr/bin/chromedriver exist" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_browser.sh: needs root (or sudo) to install chromium" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Debian names them chromium / chromium-driver; Ubuntu's chromium-browser is a snap shim,
# so Debian's names are tried first and Ubuntu's only as a fallback.
if ! $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver; then
    $SUDO apt-get install -y -qq --no-install-recommends chromium-browser chromium-chromedriver
fi

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "install_browser.sh: installed, but /usr/bin/chromium or /usr/bin/chromedriver is" \
         "missing; set SOLARIAN_CHROMIUM / SOLARIAN_CHROMEDRIVER for the tests" >&2
    exit 1
fi
