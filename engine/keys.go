package engine

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
)

// keys builds the metadata keys of docs/index-format.md under one root.
type keys struct{ root string }

func (k keys) log(id lakestream.LogID) string {
	return fmt.Sprintf("%slogs/%016x/", k.root, uint64(id))
}
func (k keys) head(id lakestream.LogID) string      { return k.log(id) + "head" }
func (k keys) idxPrefix(id lakestream.LogID) string { return k.log(id) + "idx/" }
func (k keys) idx(id lakestream.LogID, last int64) string {
	return fmt.Sprintf("%s%016x", k.idxPrefix(id), uint64(last))
}
func (k keys) cursorPrefix(id lakestream.LogID) string        { return k.log(id) + "cursor/" }
func (k keys) cursor(id lakestream.LogID, name string) string { return k.cursorPrefix(id) + name }
func (k keys) pendingPrefix() string                          { return k.root + "wal-pending/" }
func (k keys) pending(node, object string) string             { return k.pendingPrefix() + node + "/" + object }
func (k keys) windowIntent(node string, start int64) string {
	return fmt.Sprintf("%s%s/%s%013d", k.pendingPrefix(), node, windowIntentPrefix, start)
}

// windowIntentPrefix starts the name of a window intent under
// wal-pending/<node>/ (an object intent's name is an object key: wal/… or
// tables/…).
const windowIntentPrefix = "window-"

func (k keys) logsPrefix() string    { return k.root + "logs/" }
func (k keys) commitsPrefix() string { return k.root + "commits/" }
func (k keys) recordPrefix() string  { return k.root + "commits/rec/" }
func (k keys) commitSync() string    { return k.root + "commits/sync" }

// Staging sets (docs/transactions.md, "Staging (engine)"): the set's staged
// records under stage/<set>/c/, its end ("commit" or "abort"), and the key
// of its newest staged record (CommitStaged compares it: no staged record
// comes between its read of the set and its commit).
func (k keys) stagePrefix() string                  { return k.root + "stage/" }
func (k keys) stageSet(set string) string           { return k.stagePrefix() + set + "/" }
func (k keys) stageChunks(set string) string        { return k.stageSet(set) + "c/" }
func (k keys) stageEnd(set string) string           { return k.stageSet(set) + "end" }
func (k keys) stageLast(set string) string          { return k.stageSet(set) + "last" }
func (k keys) stagedRecord(set, name string) string { return k.stageChunks(set) + name }

// logStaged lists set as open on log id: put with every staged record of
// the set holding a chunk of the log, deleted by the set's end (or, past
// it, by OpenStagedSets).
func (k keys) logStagedPrefix(id lakestream.LogID) string { return k.log(id) + "staged/" }
func (k keys) logStaged(id lakestream.LogID, set string) string {
	return k.logStagedPrefix(id) + set
}

// isStagedChunkKey reports whether rest (a key after stage/) is a staged
// record's: <set>/c/<node>/<seq>.
func isStagedChunkKey(rest string) bool {
	i := strings.IndexByte(rest, '/')
	return i > 0 && strings.HasPrefix(rest[i:], "/c/")
}

// parseIdxLast returns the last offset encoded in an index key's suffix.
func parseIdxLast(key, prefix string) (int64, error) {
	if len(key) != len(prefix)+16 {
		return 0, fmt.Errorf("%w: index key %q", errCorruptMeta, key)
	}
	v, err := strconv.ParseUint(key[len(prefix):], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: index key %q", errCorruptMeta, key)
	}
	return int64(v), nil
}

// errCorruptMeta marks metadata that does not decode; it surfaces wrapped in
// read errors and is never expected in a healthy cluster.
var errCorruptMeta = index.ErrCorrupt

// Aliases keep the engine's code short.
type (
	head       = index.Head
	indexEntry = index.Entry
)

const kindWAL = index.KindWAL

var (
	decodeHead       = index.DecodeHead
	decodeIndexEntry = index.DecodeEntry
)
