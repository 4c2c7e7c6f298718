package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/configuration.md is generated from the code: regenerate it with
//
//	go run ./cmd/lakegate config docs > docs/configuration.md
func TestConfigurationDocMatchesCode(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != configDocs() {
		t.Fatal("docs/configuration.md is stale: run `go run ./cmd/lakegate config docs > docs/configuration.md`")
	}
}

func TestExampleConfigLoads(t *testing.T) {
	c, err := loadConfig("serve", []string{"--config", "../../deploy/lakegate.example.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Etcd.Endpoints) != 3 || c.Engine.Linger != 250*time.Millisecond || !c.Log.JSON {
		t.Fatalf("example not loaded: %+v", c)
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("dataDir: /from/file\npulsar:\n  addr: ':1111'\nengine:\n  linger: 5ms\n"), 0o644)
	c, err := loadConfig("serve", []string{"--config", file, "--pulsar-addr", ":3333"},
		[]string{"LAKEGATE_PULSAR_ADDR=:2222", "LAKEGATE_ENGINE_LINGER=7ms", "LAKEGATE_ETCD_ENDPOINTS=a:1, b:2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/file" || c.Pulsar.Addr != ":3333" || c.Engine.Linger != 7*time.Millisecond ||
		strings.Join(c.Etcd.Endpoints, ",") != "a:1,b:2" || c.HTTP.Addr != ":8080" || c.Engine.MaxInflightFlushes != 4 {
		t.Fatalf("precedence default < file < env < flag broken: %+v", c)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "u.yaml")
	os.WriteFile(unknown, []byte("engine:\n  lingr: 5ms\n"), 0o644)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--config", unknown}, nil, "lingr"},
		{nil, []string{"LAKEGATE_ENGINE_LINGER=soon"}, "engine.linger"},
		{[]string{"--engine-cache-bytes", "-5"}, nil, "engine.cacheBytes"},
		{[]string{"--log-level", "loud"}, nil, "log.level"},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, nil, "missing.yaml"},
	} {
		_, err := loadConfig("standalone", tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %q", tc.args, tc.env, err, tc.want)
		}
	}
}
