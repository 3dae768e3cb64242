// Command registry-htpasswd prints one htpasswd line, USER:<bcrypt of the password>, for the
// registry's htpasswd auth. The password is read from stdin (one line), never from argv, so
// it does not show in a process listing. internal/k8stest links the standard library only,
// which has no bcrypt; this module already requires golang.org/x/crypto through the registry.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || strings.ContainsAny(os.Args[1], ":\n") {
		fmt.Fprintln(os.Stderr, "usage: registry-htpasswd USER < password")
		os.Exit(2)
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(os.Stderr, "registry-htpasswd: read the password from stdin:", err)
		os.Exit(1)
	}
	pass := strings.TrimSuffix(line, "\n")
	if pass == "" {
		fmt.Fprintln(os.Stderr, "registry-htpasswd: empty password")
		os.Exit(2)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry-htpasswd:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
