package catalog

import (
	"testing"

	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/meta/metatest"
)

// Test commands:
//
//	go test -race ./engine/catalog/           # Mem and embedded etcd
//	go test -race -short ./engine/catalog/    # Mem only
//
// suite is every test that goes through a meta.Store; it runs against each
// backend.
var suite = []struct {
	name string
	run  func(t *testing.T, mk storeFactory)
}{
	{"NamespaceCRUD", testNamespaceCRUD},
	{"DropNamespaceNotEmpty", testDropNamespaceNotEmpty},
	{"DropNamespaceRacesCreateStream", testDropNamespaceRacesCreateStream},
	{"StreamCRUD", testStreamCRUD},
	{"DropStreamTombstone", testDropStreamTombstone},
	{"ConcurrentCreateStreamOneWinner", testConcurrentCreateStreamOneWinner},
	{"ConcurrentCreateStreamsUniqueLogIDs", testConcurrentCreateStreamsUniqueLogIDs},
	{"IncreasePartitions", testIncreasePartitions},
	{"ReplaceStreamProperties", testReplaceStreamProperties},
	{"LoadStreamSeesEveryWrite", testLoadStreamSeesEveryWrite},
	{"TableCatalogs", testTableCatalogs},
	{"NamesWithSlashesDoNotCollide", testNamesWithSlashesDoNotCollide},
	{"KeyLayoutAndRecords", testKeyLayoutAndRecords},
	{"RejectsUnknownRecordVersion", testRejectsUnknownRecordVersion},
	{"ResolveMaterializationThroughStore", testResolveMaterializationThroughStore},
	{"ListStreamPoliciesMatchesResolve", testListStreamPoliciesMatchesResolve},
	{"WriterReaderRoundTrip", testWriterReaderRoundTrip},
	{"StreamHandleIsASnapshot", testStreamHandleIsASnapshot},
	{"Table", testTable},
}

func runSuite(t *testing.T, mk storeFactory) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, mk) })
	}
}

func TestCatalogOnMem(t *testing.T) { runSuite(t, memStore) }

func TestCatalogOnEmbeddedEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded etcd: skipped with -short")
	}
	emb := metatest.Embedded(t)
	runSuite(t, func(t *testing.T) meta.Store { return metatest.NewEtcdStore(t, emb) })
}
