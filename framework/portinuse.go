package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ListenError is the error of a listener that could not listen on addr, the
// value of key (app.listen, app.admin_listen, a plugin's listen key), err
// being net.Listen's. When the port is in use it says who holds it, when
// /proc tells (Linux; another user's process is found only by root), and
// suggests a port free now through envVar, the key's variable. It wraps err.
func ListenError(key, envVar, addr string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s (%s): %w", addr, key, err)
	}
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	held := ""
	if pid, cmd, ok := portHolder(port); ok {
		if pid == os.Getpid() {
			held = fmt.Sprintf(" (by this process: another of its listeners has port %d)", port)
		} else {
			held = fmt.Sprintf(" (by pid %d: %s)", pid, cmd)
		}
	}
	fix := fmt.Sprintf("stop what holds port %d, or listen on another port: %s=%s", port, envVar, net.JoinHostPort(host, "PORT"))
	if free := freePortAfter(host, port); free > 0 {
		fix = fmt.Sprintf("stop what holds port %d, or listen on another port: %s=%s (free now), or %s in the file", port, envVar, net.JoinHostPort(host, strconv.Itoa(free)), key)
	}
	return fmt.Errorf("listen on %s (%s): %w%s; fix: %s", addr, key, err, held, fix)
}

// freePortAfter returns the first of the ten ports after port that host
// lets this process listen on now, or 0.
func freePortAfter(host string, port int) int {
	for p := port + 1; p <= port+10 && p <= 65535; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			ln.Close()
			return p
		}
	}
	return 0
}

// maxCommand is how much of the holder's command line an error quotes: its
// program and first arguments, on one line.
const maxCommand = 120

// portHolder finds the process listening on TCP port: the socket's inode in
// /proc/net/tcp or tcp6 (state 0A, LISTEN), then the process with a file
// descriptor on that socket. cmd is its command line, on one line, cut at
// maxCommand characters, with secrets masked.
func portHolder(port int) (pid int, cmd string, ok bool) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 32); err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return 0, "", false
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !inodes[target] {
			continue
		}
		pid, _ = strconv.Atoi(strings.Split(fd, "/")[2])
		line, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		cmd = strings.Join(strings.Fields(string(bytes.ReplaceAll(line, []byte{0}, []byte{' '}))), " ")
		if r := []rune(cmd); len(r) > maxCommand {
			cmd = string(r[:maxCommand]) + "…"
		}
		return pid, MaskSecrets(cmd), true
	}
	return 0, "", false
}

// listenAddr is one listener of a configuration: its full key and address.
type listenAddr struct{ key, addr string }

// sharedPorts refuses two listeners of one configuration that cannot both
// listen (app.listen, app.admin_listen and the keys plugins report with
// [Validation.Listens]): the second would fail the start with "address
// already in use", held by the service itself, and the file says so before
// anything listens. app.admin_listen equal to app.listen is its own rule's
// (validateAdminListen), so that pair is left to it.
func sharedPorts(cfg *AppConfig, plugins []listenAddr) ConfigErrors {
	all := []listenAddr{{"app.listen", cfg.Listen}}
	if cfg.AdminListen != "" {
		all = append(all, listenAddr{"app.admin_listen", cfg.AdminListen})
	}
	all = append(all, plugins...)
	var errs ConfigErrors
	for j, b := range all {
		for _, a := range all[:j] {
			if !sharePort(a.addr, b.addr) || a.key == "app.listen" && b.key == "app.admin_listen" && a.addr == b.addr {
				continue
			}
			errs = append(errs, ConfigError{Key: b.key,
				Problem: fmt.Sprintf("is %s, and %s is %s: two listeners of this service cannot share a port (the second would fail the start with address already in use)", b.addr, a.key, a.addr),
				Fix:     fmt.Sprintf("give one of them a port of its own: %s (%s) or %s (%s)", b.key, envName(b.key), a.key, envName(a.key))})
			break
		}
	}
	return errs
}

// sharePort reports whether listeners on a and b cannot both listen: the
// same port (not 0, which the system picks) on hosts that overlap.
func sharePort(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || !samePort(pa, pb) {
		return false
	}
	return hostsOverlap(ha, hb)
}

// samePort reports whether a and b are one port other than 0; "08080" is
// 8080, as the listener reads it. A service name ("http") is compared as
// written.
func samePort(a, b string) bool {
	na, errA := strconv.ParseUint(a, 10, 16)
	nb, errB := strconv.ParseUint(b, 10, 16)
	if errA != nil || errB != nil {
		return a != "" && strings.EqualFold(a, b)
	}
	return na == nb && na != 0
}

// hostsOverlap reports whether listeners on hosts a and b take a common
// address. A wildcard takes every address of both families: Go listens on
// [::] for "0.0.0.0" as well as for "" and "::", and on Linux, with
// net.ipv6.bindv6only at its default of 0, [::] takes the IPv4 addresses too.
// Names are not looked up, so the validation does no network I/O: localhost
// stands for the loopback addresses, and other names are compared as written.
func hostsOverlap(a, b string) bool {
	if wildcard(a) || wildcard(b) {
		return true
	}
	addrsA, okA := hostAddrs(a)
	addrsB, okB := hostAddrs(b)
	if !okA || !okB {
		return strings.EqualFold(a, b)
	}
	for _, x := range addrsA {
		if slices.Contains(addrsB, x) {
			return true
		}
	}
	return false
}

// wildcard reports whether a listener on host takes the port on every
// address: "", or an unspecified address (0.0.0.0, ::, ::ffff:0.0.0.0).
func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || err == nil && ip.Unmap().IsUnspecified()
}

// loopback is what localhost stands for.
var loopback = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}

// hostAddrs returns the addresses host stands for without a lookup: an IP
// address (an IPv4-mapped one as IPv4, which is how Go listens on it), or
// the loopback addresses for localhost and the names under it, which RFC
// 6761 (section 6.3) reserves for loopback. ok is false for other names.
func hostAddrs(host string) (addrs []netip.Addr, ok bool) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, true
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return loopback, true
	}
	return nil, false
}
