#!/usr/bin/env bash
# The system packages some slow tests use, installed from Debian's registry where missing and we
# are root (.ci/run calls this before the tests; the tests themselves install nothing):
# chromium (tests/test_report.py, tests/test_browser.py: the pages in a headless browser) and
# slurm-wlm with munge (tests/test_shards.py: a Slurm job array on localhost).
set -uo pipefail
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "system_test_deps: not root or no apt-get: nothing installed (the tests that need these skip)" >&2
  exit 0
fi
want=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || want+=(chromium)
command -v sbatch >/dev/null || want+=(slurm-wlm munge)
[ ${#want[@]} -eq 0 ] && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -q --no-install-recommends "${want[@]}"
