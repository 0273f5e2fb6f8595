#!/usr/bin/env bash
# Installs what the report's browser test needs: headless Chromium, its driver and a CJK font
# (Debian packages chromium, chromium-driver, fonts-wqy-microhei). Idempotent and non-interactive:
# it does nothing when all three are present, and runs apt-get only for what is missing.
set -euo pipefail

want=()
command -v chromium >/dev/null 2>&1 || want+=(chromium)
command -v chromedriver >/dev/null 2>&1 || want+=(chromium-driver)
[ -f /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || want+=(fonts-wqy-microhei)

if [ "${#want[@]}" -eq 0 ]; then
  echo "install-browser: chromium, chromium-driver and fonts-wqy-microhei are present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
    echo "install-browser: need root (or sudo) to install: ${want[*]}" >&2
    exit 1
  fi
fi

echo "install-browser: installing ${want[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q "${want[@]}"
