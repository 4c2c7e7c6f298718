package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// configCheck loads a configuration exactly as `lakegate serve` does
// (defaults, --config file, LAKEGATE_* environment, flags), applies serve's
// checks, and prints the effective value of every key, one "key: value"
// line each (lists comma-separated), secrets masked (maskSecret): the
// output is for logs and tickets. deploy/deploy_test.go runs it on the
// Kubernetes ConfigMap and the compose configuration.
func configCheck(args, environ []string, out io.Writer) error {
	c, err := loadConfig("config check", args, environ)
	if err != nil {
		return err
	}
	if len(c.Etcd.Endpoints) == 0 {
		return errors.New("config etcd.endpoints: serve needs external etcd endpoints (use `lakegate standalone` for a single node)")
	}
	for _, f := range configFields(c) {
		v := f.value.Interface()
		switch x := v.(type) {
		case string:
			v = maskSecret(x, f.secret)
		case []string:
			items := make([]string, len(x))
			for i, it := range x {
				items[i] = maskSecret(it, f.secret)
			}
			v = strings.Join(items, ",")
		}
		if _, err := fmt.Fprintf(out, "%s: %v\n", f.path, v); err != nil {
			return err
		}
	}
	return nil
}

// secretMask replaces a secret in `lakegate config check`'s output.
const secretMask = "******"

// maskSecret returns v as config check prints it for a field whose secret
// tag is mode (configField.secret): unchanged when mode is "", v is empty,
// or v is a file:// reference (a path, not the secret); else masked as a
// whole ("true"), or after the first mode separator (":" for "id:secret",
// "=" for "key=value"; an item without one is masked whole).
func maskSecret(v, mode string) string {
	switch {
	case mode == "" || v == "" || strings.HasPrefix(v, "file://"):
		return v
	case mode == "true":
		return secretMask
	}
	if name, _, ok := strings.Cut(v, mode); ok {
		return name + mode + secretMask
	}
	return secretMask
}
