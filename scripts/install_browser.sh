#!/bin/sh
# Install headless Chromium and its driver for the browser tests (Debian / Ubuntu).
# Idempotent: does nothing when /usr/bin/chromium and /usr/bin/chromedriver are there.
set -eu

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

APT_WHO=install_browser.sh
. "$(dirname "$0")/apt_install.sh"
# Debian names them chromium / chromium-driver; Ubuntu's chromium-browser is a snap shim,
# so Debian's names are tried first and Ubuntu's only as a fallback.
if ! apt_install chromium chromium-driver; then
    apt_install chromium-browser chromium-chromedriver
fi

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "install_browser.sh: installed, but /usr/bin/chromium or /usr/bin/chromedriver is" \
         "missing; set SOLARIAN_CHROMIUM / SOLARIAN_CHROMEDRIVER for the tests" >&2
    exit 1
fi
