//go:build unix

package storage

import (
	"io/fs"
	"syscall"
)

// fileIDOf returns what a local disk reads from a file's metadata beyond
// fs.FileInfo.
func fileIDOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	// The widths of these fields differ between the unix systems.
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino), links: uint64(st.Nlink), known: true}
}
