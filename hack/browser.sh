#!/usr/bin/env bash
# Installs the browser the UI tests drive: Debian's chromium and the matching chromium-driver, when missing.
#
# Why Debian's packages: a browser build that downloads itself (Selenium Manager, a browser-specific installer)
# cannot be fetched here, while the distribution's archive can, and its chromium and chromium-driver come from one
# source package, so their versions always match. Idempotent: does nothing when both are installed.
#
# Usage: hack/browser.sh [install|check]
set -euo pipefail

log() { printf '[browser] %s\n' "$*" >&2; }

installed() { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }

install() {
  if installed; then log "chromium and chromedriver: installed ($(chromium --version 2>/dev/null))"; return; fi
  if [ "$(id -u)" -ne 0 ]; then
    log "FATAL: chromium and chromium-driver are missing and installing them needs root (apt-get)"
    exit 1
  fi
  local start=$SECONDS
  log "installing chromium and chromium-driver (about half a minute)"
  # The package lists may be absent or stale on a fresh machine; installing from them needs them current.
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver >&2
  installed || { log "FATAL: chromium or chromedriver still missing after apt-get install"; exit 1; }
  log "installed in $((SECONDS - start)) s: $(chromium --version 2>/dev/null)"
}

case "${1:-install}" in
  install) install ;;
  check) installed || { log "chromium or chromedriver is missing; run 'make testbin'"; exit 1; } ;;
  *) log "usage: $0 [install|check]"; exit 2 ;;
esac
