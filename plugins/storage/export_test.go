package storage

// SetListPageSize makes an s3 disk list n keys per page, so tests cover paging
// without a thousand objects.
func SetListPageSize(d *Disk, n int32) {
	d.drv.(*s3Driver).pageSize = n
}
