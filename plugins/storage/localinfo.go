package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
)

func localInfo(key string, fi fs.FileInfo) Info {
	return Info{Key: key, Size: fi.Size(), ContentType: typeByKey(key), LastModified: fi.ModTime(), ETag: localETag(fi)}
}

// localETag is a local file's entity tag, in the form of S3's for an object
// put whole (32 hex digits, quoted): the first 16 bytes of the SHA-256 of the
// file's inode number, size and modification time in nanoseconds. Hashed,
// so it does not show the inode to clients. Put writes a new file beside the
// old one and renames it over the key, so every Put gives a new inode and a
// new tag, even for the same bytes; a change made in place changes the
// modification time. It is not a hash of the content: two versions share a
// tag only when a file is rewritten in place to the same size within one
// tick of the filesystem's clock (or its time is set back).
func localETag(fi fs.FileInfo) string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], fileIDOf(fi).ino)
	binary.BigEndian.PutUint64(b[8:], uint64(fi.Size()))
	binary.BigEndian.PutUint64(b[16:], uint64(fi.ModTime().UnixNano()))
	sum := sha256.Sum256(b[:])
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}
