#!/usr/bin/env bash
# Purges every Debian package that is not named in BASE_LIST (the machine image's packages),
# so that what remains is what a new machine holds. Run inside the pristine root only.
#   purge_extra.sh BASE_LIST
set -euo pipefail
base=$(grep -v '^#' "${1:?usage: purge_extra.sh BASE_LIST}" | sort -u)
present=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 != "un" {print $2}' | sort -u)
mapfile -t extra < <(comm -23 <(echo "$present") <(echo "$base"))
if [ ${#extra[@]} -eq 0 ]; then
  echo "pristine root: no package beyond the image's"
  exit 0
fi
echo "pristine root: purging ${#extra[@]} packages the image did not have (${extra[*]:0:8} ...)"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${extra[@]}" >/tmp/pristine-purge.log 2>&1 ||
  { tail -n 30 /tmp/pristine-purge.log; exit 1; }
left=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 != "un" {print $2}' | sort -u |
  comm -23 - <(echo "$base") | tr '\n' ' ')
[ -z "$left" ] || { echo "pristine root: still installed: $left" >&2; exit 1; }
