// Command mkcerts writes what the secured interop run needs into a
// directory: a throwaway CA (ca.pem), the node's certificate (node.pem,
// node-key.pem), a client certificate whose role is "app-tls"
// (app-tls.pem, app-tls-key.pem), an HS256 key (secret.key) and tokens
// signed with it: admin.jwt, app.jwt, other.jwt (roles of those names) and
// expired.jwt (role admin, expired an hour ago). For tests only.
//
//	go run ./e2e/interop/secure/mkcerts DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/internal/testcerts"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkcerts:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: mkcerts DIR")
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	set, err := testcerts.New(dir)
	if err != nil {
		return err
	}
	if _, _, err := set.Server("node"); err != nil {
		return err
	}
	if _, _, err := set.Client("app-tls", "app-tls"); err != nil {
		return err
	}
	secret, err := auth.NewSecretKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.key"), secret, 0o600); err != nil {
		return err
	}
	for name, spec := range map[string]auth.TokenSpec{
		"admin":   {Subject: "admin"},
		"app":     {Subject: "app"},
		"other":   {Subject: "other"},
		"expired": {Subject: "admin", Expiry: -time.Hour},
	} {
		tok, err := auth.NewToken(spec, secret, nil, "")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".jwt"), []byte(tok), 0o600); err != nil {
			return err
		}
	}
	return nil
}
