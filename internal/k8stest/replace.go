package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
)

// replaceFile writes b to path (mode 0600) through a temporary file renamed over it: tests
// running in parallel on one cluster ask for the same kubeconfig (a service account's, an
// identity's) while others read it, and a file written in place is empty or half written for
// a moment, which client-go reads as "no configuration has been provided".
func replaceFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
