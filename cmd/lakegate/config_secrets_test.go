package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckMasksSecrets: `lakegate config check` prints every key,
// but never a password, token, key or client secret — given in a file, the
// environment or a flag — only that one is set; file:// references (paths)
// and the names of "id:secret" and "key=value" items stay readable.
func TestConfigCheckMasksSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte(`etcd:
  endpoints: [https://etcd-0:2379]
  username: lakegate
  password: etcd-pw-SECRET1
tables:
  iceberg:
    kind: rest
    uri: https://catalog.example
    credential: cred-id:cred-SECRET2
    clients: [reader:client-SECRET3, writer:client-SECRET4]
    tokenKey: token-key-SECRET5
    clientProps: [s3.secret-access-key=prop-SECRET6, s3.region=eu-west-1]
`), 0o600)
	env := []string{
		"LAKEGATE_AUTH_ENABLED=true",
		"LAKEGATE_CLUSTER_ALLOW_PLAINTEXT_PEERS=true",
		"LAKEGATE_AUTH_TOKEN_SECRET_KEY=data:;base64,c2VjcmV0LVNFQ1JFVDc=",
		"LAKEGATE_AUTH_BROKER_CLIENT_TOKEN=eyJhbGciOiJIUzI1NiJ9.broker-SECRET8.sig",
	}
	var out bytes.Buffer
	err := configCheck([]string{"--config", file, "--tables-iceberg-token", "bearer-SECRET9"}, env, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "SECRET") || strings.Contains(got, "c2VjcmV0") {
		t.Fatalf("config check prints secrets:\n%s", got)
	}
	for _, want := range []string{
		"etcd.username: lakegate\n",
		"etcd.password: ******\n",
		"etcd.passwordFile: \n",
		"auth.tokenSecretKey: ******\n",
		"auth.brokerClientToken: ******\n",
		"tables.iceberg.credential: ******\n",
		"tables.iceberg.token: ******\n",
		"tables.iceberg.clients: reader:******,writer:******\n",
		"tables.iceberg.tokenKey: ******\n",
		"tables.iceberg.clientProps: s3.secret-access-key=******,s3.region=******\n",
		"tables.iceberg.uri: https://catalog.example\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config check output lacks %q", want)
		}
	}

	// A file:// reference is a path, printed as it is.
	out.Reset()
	err = configCheck([]string{"--etcd-endpoints", "http://e:2379", "--auth-enabled", "--cluster-allow-plaintext-peers", "--auth-token-secret-key", "file:///etc/lakegate/secret.key"}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "auth.tokenSecretKey: file:///etc/lakegate/secret.key\n") {
		t.Errorf("a file:// key reference is masked:\n%s", out.String())
	}
}

// TestSecretKeysAreTagged: every key whose name says it holds a secret
// (password, secret, token, credential, clients) carries a secret tag, so
// that `config check` masks it; names of files, claims, audiences, public
// keys and URLs are not secrets.
func TestSecretKeysAreTagged(t *testing.T) {
	for _, f := range configFields(&Config{}) {
		switch f.value.Interface().(type) {
		case string, []string:
		default:
			continue // a switch or a number holds no secret
		}
		key := f.path[strings.LastIndex(f.path, ".")+1:]
		lower := strings.ToLower(key)
		named := false
		for _, w := range []string{"password", "secret", "token", "credential", "clients", "clientprops"} {
			if strings.Contains(lower, w) {
				named = true
			}
		}
		for _, w := range []string{"File", "Claim", "Audience", "PublicKey", "Url", "URL", "Issuer", "Ttl", "TTL"} {
			if strings.Contains(key, w) {
				named = false
			}
		}
		if named && f.secret == "" {
			t.Errorf("%s looks like a secret but has no secret tag (config check would print it)", f.path)
		}
	}
}

// TestEtcdSecurityConfig: the keys that secure an external etcd cluster
// are checked at load: both halves of a client certificate, one source of
// the password and a user for it, https:// endpoints with TLS, and none of
// it for the embedded member.
func TestEtcdSecurityConfig(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("s3cret\n"), 0o600)
	ok := []string{"--etcd-endpoints", "https://e:2379", "--etcd-username", "lakegate", "--etcd-password-file", pwFile}
	c, err := loadConfig("serve", ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, user, pw, err := etcdClient(c)
	if err != nil || cfg != nil || user != "lakegate" || pw != "s3cret" {
		t.Fatalf("etcdClient: %v %q %q %v, want no TLS, lakegate, s3cret (file's trailing newline dropped)", cfg, user, pw, err)
	}
	if c, err = loadConfig("serve", nil, []string{"LAKEGATE_ETCD_ENDPOINTS=https://e:2379", "LAKEGATE_ETCD_USERNAME=u", "LAKEGATE_ETCD_PASSWORD=p"}); err != nil {
		t.Fatal(err)
	}
	if _, user, pw, err = etcdClient(c); err != nil || user != "u" || pw != "p" {
		t.Fatalf("etcdClient from the environment: %q %q %v", user, pw, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-tls-cert-file", "c.pem"}, "etcd.tlsKeyFile"},
		{[]string{"--etcd-endpoints", "http://e:2379", "--etcd-tls-ca-file", "ca.pem"}, "https://"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-username", "u"}, "etcd.password"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-password", "p"}, "etcd.username"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-username", "u", "--etcd-password", "p", "--etcd-password-file", pwFile}, "one of them"},
		{[]string{"--etcd-username", "u", "--etcd-password", "p"}, "external cluster"},
	} {
		if _, err := loadConfig("serve", tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-tls-ca-file", filepath.Join(dir, "missing.pem")}, "etcd.tlsCaFile"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-tls-ca-file", pwFile}, "no PEM certificate"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-tls-cert-file", pwFile, "--etcd-tls-key-file", pwFile}, "etcd.tlsCertFile"},
		{[]string{"--etcd-endpoints", "https://e:2379", "--etcd-username", "u", "--etcd-password-file", filepath.Join(dir, "nope")}, "etcd.passwordFile"},
	} {
		c, err := loadConfig("serve", tc.args, nil)
		if err == nil {
			_, _, _, err = etcdClient(c)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}
