# Sourced by the scripts/install-*.sh that need a Debian package. apt_install
# PACKAGE... installs them without recommends, updating the package lists first
# when apt knows no candidate for the first one. Another apt-get or dpkg on the
# machine (an unattended upgrade, a second make test) holds the dpkg lock for a
# while: both steps wait for it, for at most APT_LOCK_WAIT seconds (120):
# apt-get install through DPkg::Lock::Timeout, apt-get update, which does not
# apply that option to the lists lock (apt 2.6), by trying again every 2 s
# while the lock is held. Returns non-zero when either fails; apt-get's own
# message is on stderr.
APT_LOCK_WAIT=${APT_LOCK_WAIT:-120}

apt_update() {
	_waited=0
	while :; do
		_out=$(apt-get -q update 2>&1) && return 0
		case $_out in
		*'Could not get lock'*) [ "$_waited" -lt "$APT_LOCK_WAIT" ] || break ;;
		*) break ;;
		esac
		sleep 2
		_waited=$((_waited + 2))
	done
	printf '%s\n' "$_out" >&2
	return 1
}

apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate:.[0-9]'; then
		apt_update || return 1
	fi
	apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" install -y -q --no-install-recommends "$@" >/dev/null
}
