package deploy

// etcd as the manifests secure it (docs/security.md, "etcd"): whoever can
// write etcd owns the lakegate cluster.
//
//   - TestKubernetesEtcdSecured: the StatefulSet serves clients and peers
//     over TLS and requires certificates of its CA; the gateways present
//     one (the ConfigMap's etcd.tls* files lie in a mounted Secret); a
//     NetworkPolicy lets only the gateway pods reach 2379 and only members
//     reach 2380.
//   - TestEtcdCertsScript: k8s/etcd-certs.sh makes certificates with which
//     a real etcd member (client-cert-auth) accepts a store dialled with the
//     gateway's certificate, valid for every member name, and names the
//     Secrets the manifests mount.
//   - TestComposeEtcdAuth: compose's etcd-auth command, run with sh and
//     curl against a real etcd member, turns authentication on so that the
//     gateways' user (compose/lakegate.yaml) may use its prefix only; run
//     again, it succeeds without changing anything.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/meta"
)

// commandFlags maps a container command's --flag=value arguments (a bare
// --flag maps to "").
func commandFlags(c any) map[string]string {
	flags := map[string]string{}
	for _, a := range list(c, "command") {
		k, v, _ := strings.Cut(a.(string), "=")
		flags[k] = v
	}
	return flags
}

// secretMount returns the Secret mounted into w's first container at the
// deepest directory holding path, and whether that volume is optional.
func secretMount(w obj, path string) (secret string, optional bool) {
	c := get(w, "spec.template.spec.containers.0")
	var mount any
	for _, vm := range list(c, "volumeMounts") {
		if dir := str(vm, "mountPath"); strings.HasPrefix(path, dir+"/") && len(dir) > len(str(mount, "mountPath")) {
			mount = vm
		}
	}
	for _, v := range list(w, "spec.template.spec.volumes") {
		if mount != nil && str(v, "name") == str(mount, "name") {
			return str(v, "secret.secretName"), get(v, "secret.optional") == true
		}
	}
	return "", false
}

// certsScriptSecrets are the Secrets k8s/etcd-certs.sh creates.
func certsScriptSecrets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("k8s/etcd-certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`create secret generic ([a-z0-9-]+)`).FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

func TestKubernetesEtcdSecured(t *testing.T) {
	m := loadManifests(t)
	made := certsScriptSecrets(t)
	sts := m.byKey["StatefulSet/etcd"]
	gw := m.byKey["Deployment/lakegate"]
	if sts == nil || gw == nil {
		t.Fatal("want StatefulSet/etcd and Deployment/lakegate")
	}

	// Members: TLS for clients and peers, certificates of etcd's CA required.
	ec := get(sts, "spec.template.spec.containers.0")
	flags := commandFlags(ec)
	for _, f := range []string{"--listen-client-urls", "--advertise-client-urls", "--listen-peer-urls", "--initial-advertise-peer-urls"} {
		if !strings.HasPrefix(flags[f], "https://") {
			t.Errorf("etcd %s=%q: want https://", f, flags[f])
		}
	}
	for _, f := range []string{"--client-cert-auth", "--peer-client-cert-auth"} {
		if _, ok := flags[f]; !ok {
			t.Errorf("etcd: no %s", f)
		}
	}
	for _, f := range []string{"--cert-file", "--key-file", "--trusted-ca-file", "--peer-cert-file", "--peer-key-file", "--peer-trusted-ca-file"} {
		secret, optional := secretMount(sts, flags[f])
		if secret == "" || optional || !slices.Contains(made, secret) {
			t.Errorf("etcd %s=%q: not in a required Secret that k8s/etcd-certs.sh makes (%v): %q optional=%v", f, flags[f], made, secret, optional)
		}
	}

	// Gateways: https endpoints, the CA and a client certificate from a
	// mounted Secret.
	cmFile, ok := configMapFile(m, gw, str(gw, "spec.template.spec.containers.0.args.2"))
	if !ok {
		t.Fatal("no configuration file in the ConfigMap")
	}
	var cfg struct {
		Etcd struct {
			Endpoints   []string `yaml:"endpoints"`
			TLSCAFile   string   `yaml:"tlsCaFile"`
			TLSCertFile string   `yaml:"tlsCertFile"`
			TLSKeyFile  string   `yaml:"tlsKeyFile"`
		} `yaml:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(cmFile), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, ep := range cfg.Etcd.Endpoints {
		if !strings.HasPrefix(ep, "https://") {
			t.Errorf("ConfigMap etcd endpoint %s: want https://", ep)
		}
	}
	for key, path := range map[string]string{"tlsCaFile": cfg.Etcd.TLSCAFile, "tlsCertFile": cfg.Etcd.TLSCertFile, "tlsKeyFile": cfg.Etcd.TLSKeyFile} {
		secret, optional := secretMount(gw, path)
		if path == "" || secret == "" || optional || !slices.Contains(made, secret) {
			t.Errorf("ConfigMap etcd.%s=%q: not in a required Secret that k8s/etcd-certs.sh makes (%v): %q optional=%v", key, path, made, secret, optional)
		}
	}

	// NetworkPolicy: the etcd pods are isolated for ingress; their client
	// port admits the gateway pods only, their peer port the members only.
	gwLabels := get(gw, "spec.template.metadata.labels")
	etcdLabels := get(sts, "spec.template.metadata.labels")
	var policies []obj
	for _, np := range m.ofKind("NetworkPolicy") {
		if selects(get(np, "spec.podSelector.matchLabels"), etcdLabels) {
			policies = append(policies, np)
		}
	}
	if len(policies) == 0 {
		t.Fatal("no NetworkPolicy selects the etcd pods")
	}
	clientOpen, peerOpen := false, false
	for _, np := range policies {
		name := "NetworkPolicy/" + str(np, "metadata.name")
		if !slices.Contains(list(np, "spec.policyTypes"), any("Ingress")) {
			t.Errorf("%s: policyTypes lacks Ingress", name)
		}
		for i, rule := range list(np, "spec.ingress") {
			ports := list(rule, "ports")
			if len(ports) == 0 {
				t.Errorf("%s ingress[%d]: no ports: every port is open", name, i)
				continue
			}
			for _, p := range ports {
				port := num(p, "port")
				var want any
				switch port {
				case 2379:
					want, clientOpen = gwLabels, true
				case 2380:
					want, peerOpen = etcdLabels, true
				case 2381: // health and metrics: no keys
					continue
				default:
					t.Errorf("%s ingress[%d]: port %v is opened", name, i, get(p, "port"))
					continue
				}
				from := list(rule, "from")
				if len(from) == 0 {
					t.Errorf("%s ingress[%d]: port %d open to every source", name, i, port)
				}
				for _, peer := range from {
					if get(peer, "namespaceSelector") != nil || get(peer, "ipBlock") != nil {
						t.Errorf("%s ingress[%d]: port %d open beyond this namespace's pods: %v", name, i, port, peer)
					}
					sel := get(peer, "podSelector.matchLabels")
					if !selects(sel, want) || len(sel.(map[string]any)) < 2 {
						t.Errorf("%s ingress[%d]: port %d admits pods %v, want only %v", name, i, port, sel, want)
					}
				}
			}
		}
	}
	if !clientOpen || !peerOpen {
		t.Errorf("the NetworkPolicy closes etcd to its own clients (2379: %v) or peers (2380: %v)", clientOpen, peerOpen)
	}
}

func TestEtcdCertsScript(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	dir := t.TempDir()
	out, err := exec.Command("sh", "k8s/etcd-certs.sh", dir, "lakegate").CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-certs.sh: %v\n%s", err, out)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"ca.key", "member.key", "lakegate.key"} {
		if fi, err := os.Stat(f(name)); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, mode %v: want readable by its owner only", name, err, fi.Mode())
		}
	}
	// The member certificate is valid for every member name the gateways
	// and peers dial.
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(f("ca.crt"))
	pool.AppendCertsFromPEM(caPEM)
	b, _ := os.ReadFile(f("member.crt"))
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("member.crt: no PEM")
	}
	member, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"etcd-0.etcd", "etcd-2.etcd", "etcd-1.etcd.lakegate.svc", "etcd-1.etcd.lakegate.svc.cluster.local", "127.0.0.1"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := member.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("member certificate for %s (usage %v): %v", host, usage, err)
			}
		}
	}
	// A real member with these files and --client-cert-auth takes a store
	// dialled with the gateway's certificate, and refuses one without.
	etcd := testservers.StartSecureEtcdCluster(t, 1, testservers.EtcdSecurity{TLS: true, ClientCertAuth: true,
		CAFile: f("ca.crt"), MemberCertFile: f("member.crt"), MemberKeyFile: f("member.key")})
	cert, err := loadClientTLS(f("ca.crt"), f("lakegate.crt"), f("lakegate.key"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := meta.Dial(ctx, etcd.Endpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: "/lakegate/"}, TLS: cert})
	if err != nil {
		t.Fatalf("dial with the gateway's certificate: %v", err)
	}
	if _, _, err := s.Txn(ctx, nil, []meta.Op{{Kind: meta.OpPut, Key: "k", Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	anon, _ := loadClientTLS(f("ca.crt"), "", "")
	if _, err := meta.Dial(ctx, etcd.Endpoints, meta.DialOptions{TLS: anon, DialTimeout: 2 * time.Second}); !errors.Is(err, meta.ErrUnavailable) || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("dial without a certificate: %v, want a refusal saying a certificate is required", err)
	}
	// The Secrets it names are those the manifests mount.
	m := loadManifests(t)
	var mounted []string
	for _, w := range append(m.ofKind("Deployment"), m.ofKind("StatefulSet")...) {
		for _, v := range list(w, "spec.template.spec.volumes") {
			if s := str(v, "secret.secretName"); s != "" && get(v, "secret.optional") != true {
				mounted = append(mounted, s)
			}
		}
	}
	for _, s := range certsScriptSecrets(t) {
		if !slices.Contains(mounted, s) {
			t.Errorf("etcd-certs.sh creates Secret %s, which no workload mounts", s)
		}
	}
}

func TestComposeEtcdAuth(t *testing.T) {
	for _, tool := range []string{"sh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	compose := loadCompose(t)
	services, _ := get(compose, "services").(map[string]any)
	auth := services["etcd-auth"]
	if auth == nil {
		t.Fatal("compose: no etcd-auth service")
	}
	// Every gateway waits for it and reads its password from a secret.
	for name, svc := range lakegateServices(compose) {
		if str(svc, "depends_on.etcd-auth.condition") != "service_completed_successfully" {
			t.Errorf("compose %s does not wait for etcd-auth to complete", name)
		}
		if !slices.Contains(list(svc, "secrets"), any("etcd-lakegate-password")) {
			t.Errorf("compose %s: no secret etcd-lakegate-password", name)
		}
	}
	secretFiles := map[string]string{}
	for name, s := range get(compose, "secrets").(map[string]any) {
		file := str(s, "file")
		if _, err := os.Stat(file); err != nil {
			t.Errorf("compose secret %s: %v", name, err)
		}
		secretFiles[name] = file
	}
	var cfg struct {
		Etcd struct {
			Prefix       string `yaml:"prefix"`
			Username     string `yaml:"username"`
			PasswordFile string `yaml:"passwordFile"`
		} `yaml:"etcd"`
	}
	b, err := os.ReadFile("compose/lakegate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(cfg.Etcd.PasswordFile, "/run/secrets/")
	if cfg.Etcd.Username == "" || secretFiles[secret] == "" {
		t.Fatalf("compose/lakegate.yaml: etcd.username %q, etcd.passwordFile %q: want a user and a compose secret", cfg.Etcd.Username, cfg.Etcd.PasswordFile)
	}

	// Run the command for real: sh and curl against an etcd member, with
	// the secrets where compose mounts them replaced by their files.
	etcd := testservers.StartEtcdCluster(t, 1)
	script := strings.ReplaceAll(list(auth, "command")[0].(string), "$$", "$")
	for name, file := range secretFiles {
		abs, _ := filepath.Abs(file)
		script = strings.ReplaceAll(script, "/run/secrets/"+name, abs)
	}
	run := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Env = append(os.Environ(), "ETCD="+etcd.Endpoints[0])
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcd-auth: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Logf("first run: %s", run())
	if out := run(); !strings.Contains(out, "already") {
		t.Errorf("second run: %q, want it to find authentication on already", out)
	}

	pw, err := os.ReadFile(secretFiles[secret])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(user, password, prefix string) error {
		s, err := meta.Dial(ctx, etcd.Endpoints, meta.DialOptions{EtcdOptions: meta.EtcdOptions{Prefix: prefix}, Username: user, Password: password})
		if err == nil {
			_, _, err = s.Txn(ctx, nil, []meta.Op{{Kind: meta.OpPut, Key: "k", Value: []byte("v")}})
			s.Close()
		}
		return err
	}
	if err := dial(cfg.Etcd.Username, strings.TrimSpace(string(pw)), cfg.Etcd.Prefix); err != nil {
		t.Fatalf("the gateways' user on their prefix: %v", err)
	}
	for what, err := range map[string]error{
		"no user":           dial("", "", cfg.Etcd.Prefix),
		"a wrong password":  dial(cfg.Etcd.Username, "guess", cfg.Etcd.Prefix),
		"outside the role":  dial(cfg.Etcd.Username, strings.TrimSpace(string(pw)), "/other/"),
		"the prefix's peer": dial(cfg.Etcd.Username, strings.TrimSpace(string(pw)), strings.TrimSuffix(cfg.Etcd.Prefix, "/")+"-x/"),
	} {
		if !errors.Is(err, meta.ErrPermissionDenied) {
			t.Errorf("%s: %v, want meta.ErrPermissionDenied", what, err)
		}
	}
	// Authentication is on: a client without credentials reads nothing.
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, cfg.Etcd.Prefix+"k"); err == nil {
		t.Error("an anonymous client reads the gateways' keys")
	}
}

// loadClientTLS trusts caFile and presents cert/key (none when empty).
func loadClientTLS(caFile, cert, key string) (*tls.Config, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no CA certificate in " + caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
