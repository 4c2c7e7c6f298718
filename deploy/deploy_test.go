package deploy

// Tests of deploy/ without Docker or Kubernetes (neither runs here):
//
//   - TestDockerfile: the Dockerfile's structure (Go version = go.mod's,
//     distroless/static nonroot final stage, ports, entrypoint).
//   - TestDockerfileStaticBuild: runs the Dockerfile's own `go build` line
//     and checks the binary with debug/elf: no PT_INTERP, no DT_NEEDED.
//   - TestDockerignore: nothing the build needs is excluded from the context.
//   - TestKubernetesManifests: every manifest parses; probes, resources,
//     security contexts, selectors, ports and references hold together.
//   - TestCompose: images pinned, commands and files exist, ports consistent.
//   - TestKubernetesEtcdSecured, TestEtcdCertsScript, TestComposeEtcdAuth
//     (etcd_test.go): etcd with client TLS and client certificates, a
//     NetworkPolicy that lets only the gateways in, and compose's etcd
//     authentication, tried on real etcd member processes.
//   - TestConfigsLoad: the ConfigMap's, compose's and the example
//     configuration load with `lakegate config check` (the binary built
//     above), with the environment the manifests give them.
//
// Run: go test -p 1 -count=1 ./deploy/   (-short skips the two tests that
// build the binary, ~1–5 min cold on 2 cores).

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// --- Dockerfile ---

// dockerInstr is one Dockerfile instruction, continuation lines joined.
type dockerInstr struct {
	cmd  string // upper case: FROM, RUN, …
	args string
}

func readDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstr
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

// goModVersion is go.mod's go directive as major.minor.
func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	return string(m[1])
}

// goModRequire is the version go.mod requires of module.
func goModRequire(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

// dockerBuildLine is the RUN command of the build stage that runs
// `go build`, without its --mount flags.
func dockerBuildLine(t *testing.T, instrs []dockerInstr) string {
	t.Helper()
	for _, in := range instrs {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		f := in.args
		for strings.HasPrefix(f, "--") {
			_, f, _ = strings.Cut(f, " ")
		}
		return f
	}
	t.Fatal("Dockerfile: no RUN with go build")
	return ""
}

func TestDockerfile(t *testing.T) {
	instrs := readDockerfile(t)
	var froms []string
	args := map[string]string{}
	last := map[string]string{} // last value of each instruction in the final stage
	for _, in := range instrs {
		switch in.cmd {
		case "FROM":
			froms = append(froms, in.args)
			clear(last)
		case "ARG":
			if k, v, ok := strings.Cut(in.args, "="); ok {
				args[k] = v
			}
		}
		last[in.cmd] = in.args
	}
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage build, got FROM %q", froms)
	}
	// Builder: golang at go.mod's version.
	if want := goModVersion(t); args["GO_VERSION"] != want {
		t.Errorf("ARG GO_VERSION=%q, go.mod says go %s", args["GO_VERSION"], want)
	}
	if !strings.HasPrefix(froms[0], "golang:${GO_VERSION}") || !strings.HasSuffix(froms[0], " AS build") {
		t.Errorf("first stage %q: want golang:${GO_VERSION}… AS build", froms[0])
	}
	// Final stage: a small static base that runs as non-root.
	final := froms[len(froms)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") || !strings.HasSuffix(final, ":nonroot") {
		t.Errorf("final stage %q: want gcr.io/distroless/static…:nonroot", final)
	}
	if u := last["USER"]; u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
		t.Errorf("final stage USER %q: want a non-root uid", u)
	}
	if got := strings.Fields(last["EXPOSE"]); !slices.Equal(got, []string{"6650", "8080"}) {
		t.Errorf("EXPOSE %q, want 6650 8080", got)
	}
	if last["ENTRYPOINT"] != `["/usr/local/bin/lakegate"]` {
		t.Errorf("ENTRYPOINT %s", last["ENTRYPOINT"])
	}
	if !strings.HasPrefix(last["CMD"], `["standalone"`) {
		t.Errorf("CMD %s: want standalone by default", last["CMD"])
	}
	build := dockerBuildLine(t, instrs)
	for _, want := range []string{"CGO_ENABLED=0", "go build -ldflags", "-o /out/lakegate", "./cmd/lakegate", "-X main.version=${VERSION}"} {
		if !strings.Contains(build, want) {
			t.Errorf("build line %q lacks %q", build, want)
		}
	}
	copied := false
	for _, in := range instrs {
		if in.cmd == "COPY" && strings.Contains(in.args, "--from=build /out/lakegate /usr/local/bin/lakegate") {
			copied = true
		}
	}
	if !copied {
		t.Error("the final stage does not COPY /out/lakegate from the build stage to /usr/local/bin/lakegate")
	}
}

// The binary built by the Dockerfile's own build line, shared by the tests
// that need it.
var built struct {
	once sync.Once
	path string
	err  error
}

const testVersion = "deploy-test"

func lakegateBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the lakegate binary (-short)")
	}
	built.once.Do(func() {
		instrs := readDockerfile(t)
		line := dockerBuildLine(t, instrs)
		dir, err := os.MkdirTemp("", "lakegate-deploy-test")
		if err != nil {
			built.err = err
			return
		}
		out := filepath.Join(dir, "lakegate")
		line = strings.Replace(line, "-o /out/lakegate", "-o "+out, 1)
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "VERSION="+testVersion)
		if b, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%s: %v\n%s", line, err, b)
			return
		}
		built.path = out
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

func TestDockerfileStaticBuild(t *testing.T) {
	bin := lakegateBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has PT_INTERP: it needs a dynamic loader")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	if f.Section(".dynamic") != nil {
		t.Error("binary has a .dynamic section")
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "lakegate "+testVersion {
		t.Fatalf("lakegate version: %q, %v (want the -X main.version of the build line)", out, err)
	}
	fi, _ := os.Stat(bin)
	t.Logf("static binary: %d MiB, %s", fi.Size()>>20, strings.TrimSpace(string(out)))
}

// dockerignore reads the patterns of the repository's .dockerignore.
func dockerignore(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	return pats
}

// ignored reports whether the repository-relative path rel is excluded by
// a pattern (the forms this .dockerignore uses: "name", "/name",
// "dir/name", "**/name", "**/*.ext").
func ignored(pats []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range pats {
		if strings.HasPrefix(p, "!") {
			continue
		}
		if rest, ok := strings.CutPrefix(p, "**/"); ok {
			for _, el := range parts {
				if m, _ := filepath.Match(rest, el); m {
					return true
				}
			}
			continue
		}
		p = strings.TrimPrefix(p, "/")
		n := strings.Count(p, "/") + 1
		if len(parts) >= n {
			if m, _ := filepath.Match(p, strings.Join(parts[:n], "/")); m {
				return true
			}
		}
	}
	return false
}

func TestDockerignore(t *testing.T) {
	pats := dockerignore(t)
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Module.Path}} {{.Dir}}{{end}}", "./cmd/lakegate")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod, dir, _ := strings.Cut(l, " ")
		if mod != "github.com/lakegate/lakegate" {
			continue
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if ignored(pats, filepath.ToSlash(rel)) {
			t.Errorf(".dockerignore excludes %s, which ./cmd/lakegate imports", rel)
		}
	}
	for _, f := range []string{"go.mod", "go.sum", "cmd/lakegate/main.go"} {
		if ignored(pats, f) {
			t.Errorf(".dockerignore excludes %s", f)
		}
	}
	for _, f := range []string{".git", ".cache/bin/weed", "data/etcd", "tools/azurite/node_modules/x"} {
		if !ignored(pats, f) {
			t.Errorf(".dockerignore lets %s into the build context", f)
		}
	}
	if checked < 5 {
		t.Fatalf("only %d lakegate packages found", checked)
	}
}

// --- Kubernetes ---

// obj is one decoded manifest.
type obj = map[string]any

// get walks a path of map keys and list indices ("spec.template.spec").
func get(o any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch v := o.(type) {
		case map[string]any:
			o = v[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(v) {
				return nil
			}
			o = v[i]
		default:
			return nil
		}
	}
	return o
}

func str(o any, path string) string { s, _ := get(o, path).(string); return s }
func list(o any, path string) []any { l, _ := get(o, path).([]any); return l }
func num(o any, path string) int    { n, _ := get(o, path).(int); return n }

func decodeAll(t *testing.T, path string) []obj {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []obj
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o obj
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// manifests are the Kubernetes objects of deploy/k8s, by "Kind/name".
type manifests struct {
	byKey map[string]obj
	order []string
	files map[string]string // Kind/name → file
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	m := manifests{byKey: map[string]obj{}, files: map[string]string{}}
	var kust obj
	for _, f := range files {
		for _, o := range decodeAll(t, f) {
			kind, name := str(o, "kind"), str(o, "metadata.name")
			if str(o, "apiVersion") == "" || kind == "" {
				t.Errorf("%s: an object without apiVersion or kind", f)
				continue
			}
			if kind == "Kustomization" {
				kust = o
				continue
			}
			if name == "" {
				t.Errorf("%s: %s without metadata.name", f, kind)
			}
			key := kind + "/" + name
			if _, dup := m.byKey[key]; dup {
				t.Errorf("%s: %s defined twice", f, key)
			}
			m.byKey[key] = o
			m.order = append(m.order, key)
			m.files[key] = filepath.Base(f)
		}
	}
	// kustomization.yaml lists exactly the other files.
	if kust == nil {
		t.Fatal("deploy/k8s has no kustomization.yaml")
	}
	var res []string
	for _, r := range list(kust, "resources") {
		res = append(res, r.(string))
	}
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(res, b) {
			t.Errorf("kustomization.yaml does not list %s", b)
		}
	}
	for _, r := range res {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
	}
	return m
}

func (m manifests) ofKind(kind string) []obj {
	var out []obj
	for _, k := range m.order {
		if strings.HasPrefix(k, kind+"/") {
			out = append(out, m.byKey[k])
		}
	}
	return out
}

// selects reports whether every selector label is among labels.
func selects(selector, labels any) bool {
	s, _ := selector.(map[string]any)
	l, _ := labels.(map[string]any)
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a probe or Service port (name or number) to a
// container port number; 0 when it does not resolve.
func containerPort(c any, port any) int {
	for _, p := range list(c, "ports") {
		switch v := port.(type) {
		case string:
			if str(p, "name") == v {
				return num(p, "containerPort")
			}
		case int:
			if num(p, "containerPort") == v {
				return v
			}
		}
	}
	return 0
}

// configEnvNames are the LAKEGATE_* variables of docs/configuration.md
// (generated from the code, kept in step by cmd/lakegate's tests).
func configEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`(LAKEGATE_[A-Z0-9_]+)`").FindAllSubmatch(b, -1) {
		out[string(m[1])] = true
	}
	if len(out) < 10 {
		t.Fatalf("docs/configuration.md: only %d env variables found", len(out))
	}
	return out
}

// wantProbes are the HTTP probes each container must have: path and port.
var wantProbes = map[string]map[string]struct {
	path string
	port int
}{
	"lakegate": {"livenessProbe": {"/healthz", 8080}, "readinessProbe": {"/readyz", 8080}},
	"etcd":     {"livenessProbe": {"/livez", 2381}, "readinessProbe": {"/readyz", 2381}},
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	envNames := configEnvNames(t)
	workloads := append(m.ofKind("Deployment"), m.ofKind("StatefulSet")...)
	if len(m.ofKind("Deployment")) != 1 || len(m.ofKind("StatefulSet")) != 1 {
		t.Fatalf("want one Deployment (gateways) and one StatefulSet (etcd), got %v", m.order)
	}
	for _, w := range workloads {
		name := str(w, "kind") + "/" + str(w, "metadata.name")
		pod := get(w, "spec.template.spec")
		podLabels := get(w, "spec.template.metadata.labels")
		if !selects(get(w, "spec.selector.matchLabels"), podLabels) {
			t.Errorf("%s: spec.selector does not select its own pods", name)
		}
		if get(pod, "securityContext.runAsNonRoot") != true {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", name)
		}
		if uid := num(pod, "securityContext.runAsUser"); uid == 0 {
			t.Errorf("%s: pod runAsUser is root or unset", name)
		}
		// A PodDisruptionBudget covers the pods.
		covered := false
		for _, pdb := range m.ofKind("PodDisruptionBudget") {
			if selects(get(pdb, "spec.selector.matchLabels"), podLabels) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
		// Volumes reference objects that exist.
		for _, v := range list(pod, "volumes") {
			if cm := str(v, "configMap.name"); cm != "" && m.byKey["ConfigMap/"+cm] == nil {
				t.Errorf("%s: volume %s references missing ConfigMap %s", name, str(v, "name"), cm)
			}
		}
		containers := list(pod, "containers")
		if len(containers) == 0 {
			t.Errorf("%s: no containers", name)
		}
		for _, c := range containers {
			cname := name + " container " + str(c, "name")
			probes, ok := wantProbes[str(c, "name")]
			if !ok {
				t.Errorf("%s: no probe expectations for this container", cname)
			}
			for kind, want := range probes {
				p := get(c, kind)
				if p == nil {
					t.Errorf("%s: no %s", cname, kind)
					continue
				}
				if got := str(p, "httpGet.path"); got != want.path {
					t.Errorf("%s: %s path %q, want %q", cname, kind, got, want.path)
				}
				if got := containerPort(c, get(p, "httpGet.port")); got != want.port {
					t.Errorf("%s: %s port %v resolves to %d, want %d", cname, kind, get(p, "httpGet.port"), got, want.port)
				}
			}
			if sp := get(c, "startupProbe"); sp != nil && containerPort(c, get(sp, "httpGet.port")) == 0 {
				t.Errorf("%s: startupProbe port does not resolve", cname)
			}
			for _, r := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
				if get(c, "resources."+r) == nil {
					t.Errorf("%s: no resources.%s", cname, r)
				}
			}
			sc := get(c, "securityContext")
			if get(sc, "allowPrivilegeEscalation") != false || get(sc, "runAsNonRoot") != true || get(sc, "readOnlyRootFilesystem") != true {
				t.Errorf("%s: securityContext must set allowPrivilegeEscalation false, runAsNonRoot and readOnlyRootFilesystem true", cname)
			}
			if caps := list(sc, "capabilities.drop"); !slices.Contains(caps, any("ALL")) {
				t.Errorf("%s: capabilities.drop lacks ALL", cname)
			}
			img := str(c, "image")
			if i := strings.LastIndex(img, ":"); i < 0 || strings.Contains(img[i:], "/") || strings.HasSuffix(img, ":latest") {
				t.Errorf("%s: image %q is not pinned to a tag", cname, img)
			}
			for _, ef := range list(c, "envFrom") {
				if s := str(ef, "secretRef.name"); s != "" && m.byKey["Secret/"+s] == nil {
					t.Errorf("%s: envFrom references missing Secret %s", cname, s)
				}
			}
			for _, e := range list(c, "env") {
				if n := str(e, "name"); strings.HasPrefix(n, "LAKEGATE_") && !envNames[n] {
					t.Errorf("%s: env %s is no configuration key (docs/configuration.md)", cname, n)
				}
			}
		}
	}

	// Gateways: `serve --config` on the ConfigMap's file.
	gw := m.byKey["Deployment/lakegate"]
	if gw == nil {
		t.Fatal("no Deployment/lakegate")
	}
	if n := num(gw, "spec.replicas"); n < 2 {
		t.Errorf("Deployment/lakegate: %d replicas, want ≥ 2", n)
	}
	c := get(gw, "spec.template.spec.containers.0")
	args := list(c, "args")
	if len(args) != 3 || args[0] != "serve" || args[1] != "--config" {
		t.Fatalf("lakegate args %v, want serve --config FILE", args)
	}
	cmFile, ok := configMapFile(m, gw, args[2].(string))
	if !ok {
		t.Errorf("--config %s is not a key of a mounted ConfigMap", args[2])
	} else if cmFile == "" {
		t.Errorf("--config %s: empty", args[2])
	}
	for _, p := range []int{6650, 8080} {
		if containerPort(c, p) == 0 {
			t.Errorf("lakegate container does not expose %d", p)
		}
	}

	// Services select pods and their ports resolve.
	exposed := map[int]bool{}
	for _, svc := range m.ofKind("Service") {
		name := "Service/" + str(svc, "metadata.name")
		var target obj
		var targetName string
		for _, w := range workloads {
			if selects(get(svc, "spec.selector"), get(w, "spec.template.metadata.labels")) {
				target, targetName = w, str(w, "kind")+"/"+str(w, "metadata.name")
			}
		}
		if target == nil {
			t.Errorf("%s selects no workload", name)
			continue
		}
		tc := get(target, "spec.template.spec.containers.0")
		for _, p := range list(svc, "spec.ports") {
			tp := get(p, "targetPort")
			if tp == nil {
				tp = num(p, "port")
			}
			if containerPort(tc, tp) == 0 {
				t.Errorf("%s port %v: targetPort %v is no container port", name, get(p, "port"), tp)
			}
			if targetName == "Deployment/lakegate" {
				exposed[num(p, "port")] = true
			}
		}
	}
	if !exposed[6650] || !exposed[8080] {
		t.Errorf("no Service exposes the gateways' 6650 and 8080: %v", exposed)
	}

	// etcd: a StatefulSet with a headless Service, members named in
	// --initial-cluster, and the gateways' endpoints pointing at them.
	sts := m.byKey["StatefulSet/etcd"]
	svcName := str(sts, "spec.serviceName")
	hs := m.byKey["Service/"+svcName]
	if hs == nil || str(hs, "spec.clusterIP") != "None" {
		t.Fatalf("StatefulSet/etcd: serviceName %q is not a headless Service", svcName)
	}
	replicas := num(sts, "spec.replicas")
	if replicas != 3 {
		t.Errorf("etcd replicas = %d, want 3", replicas)
	}
	ec := get(sts, "spec.template.spec.containers.0")
	if want := "quay.io/coreos/etcd:" + goModRequire(t, "go.etcd.io/etcd/server/v3"); str(ec, "image") != want {
		t.Errorf("etcd image %s, want %s (the version in go.mod)", str(ec, "image"), want)
	}
	flags := map[string]string{}
	for _, a := range list(ec, "command") {
		if k, v, ok := strings.Cut(a.(string), "="); ok {
			flags[k] = v
		}
	}
	var members []string
	for i := range replicas {
		members = append(members, fmt.Sprintf("%s-%d=https://%s-%d.%s:2380", str(sts, "metadata.name"), i, str(sts, "metadata.name"), i, svcName))
	}
	if got := flags["--initial-cluster"]; got != strings.Join(members, ",") {
		t.Errorf("etcd --initial-cluster %q, want %q", got, strings.Join(members, ","))
	}
	if !strings.HasSuffix(flags["--listen-metrics-urls"], ":2381") {
		t.Errorf("etcd --listen-metrics-urls %q: the probes use 2381", flags["--listen-metrics-urls"])
	}
	var cfg struct {
		Etcd struct {
			Endpoints []string `yaml:"endpoints"`
		} `yaml:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(cmFile), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Etcd.Endpoints) != replicas {
		t.Errorf("ConfigMap etcd.endpoints %v: want one per member (%d)", cfg.Etcd.Endpoints, replicas)
	}
	for i, ep := range cfg.Etcd.Endpoints {
		if want := fmt.Sprintf("https://%s-%d.%s:2379", str(sts, "metadata.name"), i, svcName); ep != want {
			t.Errorf("ConfigMap etcd.endpoints[%d] = %s, want %s", i, ep, want)
		}
	}
}

// configMapFile returns the content of the file at path as mounted from a
// ConfigMap into w's first container.
func configMapFile(m manifests, w obj, path string) (string, bool) {
	c := get(w, "spec.template.spec.containers.0")
	for _, vm := range list(c, "volumeMounts") {
		dir := str(vm, "mountPath")
		key, ok := strings.CutPrefix(path, dir+"/")
		if !ok {
			continue
		}
		for _, v := range list(w, "spec.template.spec.volumes") {
			if str(v, "name") != str(vm, "name") {
				continue
			}
			cm := m.byKey["ConfigMap/"+str(v, "configMap.name")]
			if cm == nil {
				return "", false
			}
			data, _ := get(cm, "data").(map[string]any) // keys hold dots
			s, ok := data[key].(string)
			return s, ok
		}
	}
	return "", false
}

// --- compose ---

func loadCompose(t *testing.T) obj {
	t.Helper()
	docs := decodeAll(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	return docs[0]
}

// hostPort returns the host port a service maps to container port cport.
func hostPort(svc any, cport int) int {
	for _, p := range list(svc, "ports") {
		h, c, ok := strings.Cut(p.(string), ":")
		if ok && c == strconv.Itoa(cport) {
			n, _ := strconv.Atoi(h)
			return n
		}
	}
	return 0
}

// lakegateServices are the compose services that run lakegate.
func lakegateServices(compose obj) map[string]any {
	out := map[string]any{}
	for name, svc := range get(compose, "services").(map[string]any) {
		if strings.HasPrefix(str(svc, "image"), "lakegate:") {
			out[name] = svc
		}
	}
	return out
}

func TestCompose(t *testing.T) {
	compose := loadCompose(t)
	services, _ := get(compose, "services").(map[string]any)
	if len(services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	named, _ := get(compose, "volumes").(map[string]any)
	hostPorts := map[string]string{}
	for name, svc := range services {
		img := str(svc, "image")
		if img == "" {
			t.Errorf("service %s: no image", name)
		}
		if i := strings.LastIndex(img, ":"); i < 0 || strings.HasSuffix(img, ":latest") {
			t.Errorf("service %s: image %q is not pinned to a tag", name, img)
		}
		if b := get(svc, "build"); b != nil {
			df := filepath.Join(str(b, "context"), str(b, "dockerfile"))
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s: build dockerfile %s: %v", name, df, err)
			}
		}
		deps := get(svc, "depends_on")
		var depNames []string
		switch d := deps.(type) {
		case []any:
			for _, x := range d {
				depNames = append(depNames, x.(string))
			}
		case map[string]any:
			for k := range d {
				depNames = append(depNames, k)
			}
		}
		for _, d := range depNames {
			if services[d] == nil {
				t.Errorf("service %s depends on missing service %s", name, d)
			}
		}
		for _, v := range list(svc, "volumes") {
			src, _, _ := strings.Cut(v.(string), ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s: bind mount %s: %v", name, src, err)
				}
			} else if _, ok := named[src]; !ok {
				t.Errorf("service %s: volume %s is not declared", name, src)
			}
		}
		for _, p := range list(svc, "ports") {
			h, _, _ := strings.Cut(p.(string), ":")
			if other, dup := hostPorts[h]; dup {
				t.Errorf("host port %s mapped by %s and %s", h, other, name)
			}
			hostPorts[h] = name
		}
	}
	lg := lakegateServices(compose)
	if len(lg) != 2 {
		t.Fatalf("want 2 lakegate services, got %d", len(lg))
	}
	built := 0
	for name, svc := range lg {
		if get(svc, "build") != nil {
			built++
		}
		cmd := list(svc, "command")
		if len(cmd) != 3 || cmd[0] != "serve" || cmd[1] != "--config" {
			t.Errorf("service %s: command %v, want serve --config FILE", name, cmd)
		}
		adv := str(svc, "environment.LAKEGATE_PULSAR_ADVERTISED_ADDR")
		if want := fmt.Sprintf("localhost:%d", hostPort(svc, 6650)); adv != want {
			t.Errorf("service %s: advertised %q, but 6650 is published as %s", name, adv, want)
		}
		if hostPort(svc, 8080) == 0 {
			t.Errorf("service %s: 8080 not published", name)
		}
	}
	if built != 2 {
		t.Errorf("%d of the lakegate services build the image; want both (same image, built once)", built)
	}
	// The configuration points at compose services, on ports they serve.
	var cfg struct {
		Objects string `yaml:"objects"`
		Etcd    struct {
			Endpoints []string `yaml:"endpoints"`
		} `yaml:"etcd"`
	}
	b, err := os.ReadFile("compose/lakegate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, ep := range cfg.Etcd.Endpoints {
		host := strings.TrimPrefix(ep, "http://")
		h, port, _ := strings.Cut(host, ":")
		if services[h] == nil || !slices.Contains(list(services[h], "command"), any("--listen-client-urls=http://0.0.0.0:"+port)) {
			t.Errorf("etcd endpoint %s: no compose service %s listening on %s", ep, h, port)
		}
	}
	em := regexp.MustCompile(`endpoint=http://([^:&]+):(\d+)`).FindStringSubmatch(cfg.Objects)
	if em == nil {
		t.Fatalf("objects %q has no endpoint", cfg.Objects)
	}
	if services[em[1]] == nil || !slices.Contains(list(services[em[1]], "command"), any("-s3.port="+em[2])) {
		t.Errorf("objects endpoint %s:%s: no compose service serving S3 there", em[1], em[2])
	}
	bucket := strings.TrimPrefix(strings.SplitN(cfg.Objects, "?", 2)[0], "s3://")
	cb := strings.Join(func() []string {
		var s []string
		for _, x := range list(services["create-bucket"], "command") {
			s = append(s, x.(string))
		}
		return s
	}(), " ")
	if !strings.Contains(cb, "http://"+em[1]+":"+em[2]+"/"+bucket) {
		t.Errorf("create-bucket does not create bucket %s on %s:%s: %s", bucket, em[1], em[2], cb)
	}
}

// --- configurations, loaded by lakegate itself ---

// configCheck runs `lakegate config check --config file` with env only
// and returns the effective configuration by key.
func configCheck(t *testing.T, bin, file string, env []string) map[string]string {
	t.Helper()
	cmd := exec.Command(bin, "config", "check", "--config", file)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lakegate config check --config %s: %v\n%s", file, err, stderr.String())
	}
	kv := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		kv[k] = v
	}
	return kv
}

// podEnv is the container's literal env, with $(VAR) references expanded
// from earlier variables and the downward-API fields given; a
// resourceFieldRef is the container's resource in bytes (limits.memory:
// a "Gi" or "Mi" quantity).
func podEnv(t *testing.T, c any, fields map[string]string) []string {
	vals := map[string]string{}
	var out []string
	for _, e := range list(c, "env") {
		n := str(e, "name")
		v, ok := get(e, "value").(string)
		switch {
		case ok:
		case str(e, "valueFrom.resourceFieldRef.resource") != "":
			v = strconv.FormatInt(quantityBytes(t, str(c, "resources."+str(e, "valueFrom.resourceFieldRef.resource"))), 10)
		default:
			v = fields[str(e, "valueFrom.fieldRef.fieldPath")]
		}
		v = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(v, func(s string) string { return vals[s[2:len(s)-1]] })
		vals[n] = v
		out = append(out, n+"="+v)
	}
	return out
}

// quantityBytes is a Kubernetes memory quantity ("2Gi", "512Mi") in bytes.
func quantityBytes(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, unit := range map[string]int64{"Gi": 1 << 30, "Mi": 1 << 20} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil {
				return v * unit
			}
		}
	}
	t.Fatalf("memory quantity %q: want <n>Gi or <n>Mi", q)
	return 0
}

func TestConfigsLoad(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()

	// Kubernetes: the ConfigMap with a pod's environment.
	m := loadManifests(t)
	gw := m.byKey["Deployment/lakegate"]
	c := get(gw, "spec.template.spec.containers.0")
	path := str(c, "args.2")
	content, ok := configMapFile(m, gw, path)
	if !ok {
		t.Fatalf("%s is not in a mounted ConfigMap", path)
	}
	file := filepath.Join(dir, "k8s.yaml")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	env := podEnv(t, c, map[string]string{"metadata.name": "lakegate-7d9f-x2", "status.podIP": "10.1.2.3"})
	kv := configCheck(t, bin, file, env)
	want := map[string]string{
		"pulsar.advertisedAddr": "10.1.2.3:6650",
		"engine.nodeId":         "lakegate-7d9f-x2",
		"pulsar.addr":           ":" + strconv.Itoa(containerPort(c, "pulsar")),
		"http.addr":             ":" + strconv.Itoa(containerPort(c, "http")),
		"log.json":              "true",
		// The memory budget is the container's limit (docs/memory.md).
		"memory.limit": strconv.FormatInt(quantityBytes(t, str(c, "resources.limits.memory")), 10),
	}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("k8s config %s = %q, want %q", k, kv[k], v)
		}
	}
	if dd := kv["dataDir"]; !slices.ContainsFunc(list(c, "volumeMounts"), func(vm any) bool { return str(vm, "mountPath") == dd }) {
		t.Errorf("k8s config dataDir %s is not a mounted volume (the root filesystem is read-only)", dd)
	}
	t.Logf("k8s: objects %s, etcd %s", kv["objects"], kv["etcd.endpoints"])

	// compose: each gateway's file and environment.
	compose := loadCompose(t)
	for name, svc := range lakegateServices(compose) {
		var env []string
		for k, v := range get(svc, "environment").(map[string]any) {
			env = append(env, k+"="+fmt.Sprint(v))
		}
		src, dst, _ := strings.Cut(str(svc, "volumes.0"), ":")
		if !strings.HasPrefix(strings.TrimSuffix(dst, ":ro"), str(svc, "command.2")) {
			t.Errorf("compose %s: --config %s is not the mounted %s", name, str(svc, "command.2"), dst)
		}
		kv := configCheck(t, bin, src, env)
		if kv["pulsar.advertisedAddr"] != str(svc, "environment.LAKEGATE_PULSAR_ADVERTISED_ADDR") || kv["engine.nodeId"] != name {
			t.Errorf("compose %s: advertised %q node %q", name, kv["pulsar.advertisedAddr"], kv["engine.nodeId"])
		}
	}

	// The example configuration.
	kv = configCheck(t, bin, "lakegate.example.yaml", nil)
	if kv["etcd.endpoints"] == "" {
		t.Error("example: no etcd endpoints")
	}

	// And a broken one fails naming the key.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("etcd:\n  endpoints: [http://e:2379]\nlog:\n  level: loud\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "config", "check", "--config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "log.level") {
		t.Errorf("bad config: %v %s", err, out)
	}
}
