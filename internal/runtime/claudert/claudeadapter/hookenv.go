package claudeadapter

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// preloadFile is the dynamic loader's system-wide preload list. A test points it elsewhere.
var preloadFile = "/etc/ld.so.preload"

// loaderVars are the environment variables that make the dynamic loader run code the
// program did not link: every dynamically linked program claude starts (the /bin/sh that
// runs each hook first of all) would run it before agora's hook.
var loaderVars = []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"}

// checkNoPreload refuses to go on when the dynamic loader could run code agora did not
// choose: /etc/ld.so.preload exists (the sandbox's /etc is read-only, so only a host
// whose own /etc has one, or a sandbox that lost that protection, gets here), or env sets
// one of loaderVars. claude runs every hook through a shell, which such code could replace
// with a forger of the hook's reports; the worker sees the missing reports and stops the
// run anyway (hookaudit.go), and this check refuses before anything runs. It is defence in
// depth, not the boundary.
func checkNoPreload(env []string) error {
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, v := range loaderVars {
			if k == v {
				return fmt.Errorf("the environment sets %s, which could run code in claude's tool hooks", v)
			}
		}
	}
	if _, err := os.Lstat(preloadFile); err == nil {
		return fmt.Errorf("%s exists, which could run code in claude's tool hooks", preloadFile)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot tell whether %s exists (%v), which could run code in claude's tool hooks", preloadFile, err)
	}
	return nil
}
