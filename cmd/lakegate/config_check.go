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
// line each (lists comma-separated). deploy/deploy_test.go runs it on the
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
		if l, ok := v.([]string); ok {
			v = strings.Join(l, ",")
		}
		if _, err := fmt.Fprintf(out, "%s: %v\n", f.path, v); err != nil {
			return err
		}
	}
	return nil
}
