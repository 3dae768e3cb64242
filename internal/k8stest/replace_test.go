package k8stest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestReplaceFile_ReadersSeeWholeFiles: while one goroutine rewrites a kubeconfig over and over,
// every read of it finds one whole version, never an empty or partial file, and the file is
// 0600 with no temporary left beside it.
func TestReplaceFile_ReadersSeeWholeFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sa-agora.kubeconfig")
	versions := [][]byte{make([]byte, 64<<10), make([]byte, 96<<10)}
	for i := range versions {
		for j := range versions[i] {
			versions[i][j] = byte('a' + i)
		}
	}
	if err := replaceFile(path, versions[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := replaceFile(path, versions[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 2000 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != len(versions[0]) && len(b) != len(versions[1]) || b[0] != b[len(b)-1] {
			close(stop)
			wg.Wait()
			t.Fatalf("a read found %d bytes, not a whole version", len(b))
		}
	}
	close(stop)
	wg.Wait()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the kubeconfig is %v (%v), want mode 0600", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left beside it: %v", left)
	}
}
