#!/bin/sh
# Installs Debian's Docker engine (docker.io: dockerd, containerd, runc and the
# /usr/bin/docker client) for the docker-mode drill in drills/. The drill starts
# its own dockerd (own data root, socket and pidfile; --iptables=false
# --ip6tables=false --bridge=none) and stops it by pid: nothing here starts a
# daemon. Idempotent: does nothing when /usr/sbin/dockerd is already there.
# It installs only when JFAST_DRILL_DOCKER=1 or CI is set (`make test-servers`
# runs every scripts/install-*.sh; elsewhere this one says so and does nothing). Measured on this kind of machine: 94 s including apt-get update
# (2 cores).
set -eu
if [ "${JFAST_DRILL_DOCKER:-}" != 1 ] && [ -z "${CI:-}" ]; then
	echo "install-docker.sh: skipped (set JFAST_DRILL_DOCKER=1, or CI, to install docker.io for the docker drill)"
	exit 0
fi
if [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ]; then
	echo "docker.io already installed: $(/usr/sbin/dockerd --version)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "install-docker.sh: needs root (apt-get install docker.io)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A failure here must not fail `make test`: the docker drill then skips, naming
# the reason (dockerd is not installed).
if ! apt-cache policy docker.io 2>/dev/null | grep -q Candidate:.[0-9]; then
	apt-get update -q || echo "install-docker.sh: apt-get update failed" >&2
fi
# --no-install-recommends: no cgroupfs-mount, git, ubuntu-fan and the like.
if ! apt-get install -y -q --no-install-recommends docker.io >/dev/null; then
	echo "install-docker.sh: WARNING: apt-get install docker.io failed; the docker drill will be skipped" >&2
	exit 0
fi
echo "docker.io installed: $(/usr/sbin/dockerd --version)"
