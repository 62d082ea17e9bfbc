#!/bin/sh
# Installs Debian's Docker engine (docker.io: dockerd, containerd, runc and the
# /usr/bin/docker client) for the docker-mode drill in drills/. The drill starts
# its own dockerd (own data root, socket and pidfile; --iptables=false
# --ip6tables=false --bridge=none) and stops it by pid: nothing here starts a
# daemon. Idempotent: does nothing when /usr/sbin/dockerd is already there.
# It installs only when JFAST_DRILL_DOCKER=1 or CI is set (`make test-servers`
# runs every scripts/install-*.sh; elsewhere this one prints a SKIP line and
# does nothing). Measured on this kind of machine: 94 s including apt-get
# update (2 cores). It waits up to 120 s for another apt or dpkg process
# (scripts/apt.sh); a failure does not fail `make test`: it prints a SKIP line
# and the docker drill skips, naming the reason (dockerd is not installed).
set -eu
. "$(dirname "$0")/apt.sh"
if [ "${JFAST_DRILL_DOCKER:-}" != 1 ] && [ -z "${CI:-}" ]; then
	echo "SKIP docker.io (set JFAST_DRILL_DOCKER=1, or CI, to install it; the docker drill skips)"
	exit 0
fi
if [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ]; then
	echo "docker.io already installed: $(/usr/sbin/dockerd --version)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "SKIP docker.io (apt-get install docker.io needs root; the docker drill skips)"
	exit 0
fi
# --no-install-recommends: no cgroupfs-mount, git, ubuntu-fan and the like.
if ! apt_install docker.io; then
	echo "SKIP docker.io (install-docker.sh: apt-get install docker.io failed, see above; the docker drill skips)"
	exit 0
fi
echo "docker.io installed: $(/usr/sbin/dockerd --version)"
