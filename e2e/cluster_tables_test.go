package e2e

// Tables at cluster scale (docs/cluster.md, "Compaction"; docs/iceberg-catalog.md):
// three `lakegate serve` processes on one etcd compact every table once —
// each table by one node, the tables spread over the nodes, no compaction
// conflict anywhere — into Delta and the lakegate Iceberg catalog, which
// every node serves over REST; a kill -9 of a table's compaction owner
// hands the table to another node, which finishes it.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/meta"
)

func TestClusterTablesCompactOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	objects := "file://" + filepath.ToSlash(t.TempDir())
	c := startLGCluster(t, 3, objects,
		"--tables-age", "200ms", "--tables-interval", "300ms", "--tables-scan-interval", "500ms",
		"--log-level", "info")
	ctx := ctxFor(t, 3*time.Minute)
	const topics, parts, perTopic = 6, 2, 60
	cl := c.client(c.serviceURL())
	produce := func(topic string, from, n int) {
		t.Helper()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/" + topic})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for i := from; i < from+n; i++ {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: fmt.Appendf(nil, "%s-%d", topic, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range topics {
		topic := fmt.Sprintf("ct%d", i)
		if code := admDo(t, http.MethodPut, c.nodes[0].httpURL+"/admin/v2/persistent/public/default/"+topic+"/partitions", "application/json", fmt.Sprint(parts), nil); code/100 != 2 {
			t.Fatalf("create %s: HTTP %d", topic, code)
		}
		produce(topic, 0, perTopic)
	}
	for i := range topics {
		waitForTable(t, ctx, c.nodes[i%3].httpURL, fmt.Sprintf("public/default/ct%d", i), perTopic, "DELTA", "ICEBERG")
	}

	// Every table had one compaction owner: nobody lost a claim race.
	owners := tableOwners(t, c)
	compacted := 0
	for _, n := range c.nodes {
		fams := scrape(t, n.httpURL+"/metrics")
		if v, _ := familyValue(fams["lakegate_compaction_runs_total"], map[string]string{"result": "conflict"}); v != 0 {
			t.Fatalf("%s: %v compaction conflicts, want 0 (one compactor per table)", n.name, v)
		}
		if v, _ := familyValue(fams["lakegate_compaction_runs_total"], map[string]string{"result": "compacted"}); v > 0 {
			compacted++
		}
	}
	if compacted < 2 {
		t.Fatalf("only %d node(s) compacted; tables were placed %v", compacted, owners)
	}

	// Every node serves the catalog; the topics are tables public.default.<topic>.
	for _, n := range c.nodes {
		var list struct {
			Identifiers []struct {
				Namespace []string `json:"namespace"`
				Name      string   `json:"name"`
			} `json:"identifiers"`
		}
		if code := httpJSON(t, http.MethodGet, n.httpURL+"/iceberg/v1/namespaces/"+url.PathEscape("public\x1fdefault")+"/tables", &list); code != 200 {
			t.Fatalf("%s: list tables: HTTP %d", n.name, code)
		}
		if len(list.Identifiers) != topics {
			t.Fatalf("%s lists %d tables, want %d: %+v", n.name, len(list.Identifiers), topics, list.Identifiers)
		}
	}

	// kill -9 the compaction owner of ct0; more messages to ct0 reach the
	// table through another node.
	unit := "tables/public/default/ct0"
	victim := c.nodeByName(owners[unit])
	if victim == nil {
		t.Fatalf("no compaction owner of %s among %v", unit, owners)
	}
	victim.signal(t, syscall.SIGKILL)
	victim.waitExit(t, 10*time.Second)
	var alive []*lakegateProc
	for _, n := range c.nodes {
		if n != victim {
			alive = append(alive, n)
		}
	}
	hosts := []string{}
	for _, n := range alive {
		hosts = append(hosts, strings.TrimPrefix(n.pulsarURL, "pulsar://"))
	}
	cl = c.client("pulsar://" + strings.Join(hosts, ","))
	produce("ct0", perTopic, perTopic)
	waitForTable(t, ctx, alive[0].httpURL, "public/default/ct0", 2*perTopic, "DELTA", "ICEBERG")
	now := tableOwners(t, c)
	if o := now[unit]; o == "" || o == victim.name {
		t.Fatalf("after the kill, %s compacted by %q (victim %s): %v", unit, o, victim.name, now)
	}
	t.Logf("compaction owners: %v; after kill -9 of %s: %s took %s", owners, victim.name, now[unit], unit)
}

// tableOwners reads the compaction owners of the tables from etcd
// (owners/tables/<stream> → {"member": …}, docs/cluster.md).
func tableOwners(t *testing.T, c *lgCluster) map[string]string {
	t.Helper()
	ms, err := meta.Dial(t.Context(), c.etcd.Endpoints, meta.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	p := "/lakegate/owners/tables/"
	kvs, err := ms.Range(t.Context(), p, "/lakegate/owners/tables0", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range kvs {
		var v struct {
			Member string `json:"member"`
		}
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(kv.Key, "/lakegate/owners/")] = v.Member
	}
	return out
}

func (c *lgCluster) nodeByName(name string) *lakegateProc {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}
