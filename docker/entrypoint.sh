#!/bin/sh
# The container's entrypoint: runs `ccwire` with the arguments given (`serve` by default).
# `ccwire serve` without --listen listens on every interface (port 8787) when keys are set
# (CCWIRE_API_KEYS or --api-key, or CCWIRE_ADMIN_KEY with --managed-keys), and otherwise only
# on the container's loopback, saying how to serve the network; any other command runs as given.
set -eu

[ $# -gt 0 ] || set -- serve
if [ "$1" != serve ]; then
  exec ccwire "$@"
fi
keys=${CCWIRE_API_KEYS:-}
for arg in "$@"; do
  case "$arg" in
    --listen | --listen=*) exec ccwire "$@" ;;
    --api-key | --api-key=*) keys=given ;;
    --managed-keys) [ -z "${CCWIRE_ADMIN_KEY:-}" ] || keys=managed ;;
  esac
done
if [ -n "$keys" ]; then
  listen=0.0.0.0:8787
else
  listen=127.0.0.1:8787
  echo "ccwire-entrypoint: no API keys (CCWIRE_API_KEYS) are set: ccwire serve listens on the container's loopback only, out of the network's reach; set CCWIRE_API_KEYS to serve on port 8787" >&2
fi
shift
exec ccwire serve --listen "$listen" "$@"
