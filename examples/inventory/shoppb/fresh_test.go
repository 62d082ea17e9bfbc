package shoppb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the Go code of inventory.proto with
// scripts/gen-proto.sh (the pinned protoc-gen-go and protoc-gen-go-grpc) into
// a temporary directory and fails when it differs from the committed files:
// a .proto changed without running the script, or generated code edited by
// hand. It skips, naming the script that installs them, when the tools are
// missing (`make test` installs them first).
func TestGeneratedCodeIsFresh(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env GOPATH: %v", err)
	}
	bin := filepath.Join(filepath.SplitList(strings.TrimSpace(string(gopath)))[0], "bin")
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := exec.LookPath(tool); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Skipf("%s is not installed: run scripts/install-protoc.sh", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("sh", filepath.Join(root, "scripts", "gen-proto.sh"))
	cmd.Env = append(os.Environ(), "JFAST_PROTO_OUT="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/gen-proto.sh: %v\n%s", err, msg)
	}
	for _, name := range []string{"inventory.pb.go", "inventory_grpc.pb.go"} {
		committed, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := os.ReadFile(filepath.Join(out, "examples", "inventory", "shoppb", name))
		if err != nil {
			t.Fatalf("scripts/gen-proto.sh did not generate %s: %v", name, err)
		}
		if !bytes.Equal(committed, fresh) {
			t.Errorf("examples/inventory/shoppb/%s is stale: run scripts/gen-proto.sh and commit the result", name)
		}
	}
}
