package main

import (
	"net/http"
	"testing"
)

func TestFiles(t *testing.T) {
	t.Parallel()
	svc := setup(t, map[string]string{"JFAST_STORAGE_DISKS__FILES__ROOT": t.TempDir()})
	if resp := svc.Do(t, http.MethodPut, "/files/note.txt", "hello, storage", "Content-Type", "text/plain"); resp.Status != http.StatusNoContent {
		t.Fatalf("put: status %d: %s", resp.Status, resp)
	}
	resp := svc.Get(t, "/files/note.txt")
	if resp.Status != http.StatusOK || resp.String() != "hello, storage" {
		t.Fatalf("get: status %d: %s", resp.Status, resp)
	}
	if resp := svc.Get(t, "/files/missing.txt"); resp.Status != http.StatusNotFound {
		t.Fatalf("a missing file: status %d: %s", resp.Status, resp)
	}
}
