package admin

// Admin REST: internal stats (pulsar-admin topics stats-internal and
// partitioned-stats-internal) in Pulsar's PersistentTopicInternalStats
// shape, filled with lakegate's equivalents (docs/message-ids.md,
// "Internal stats"): one log per topic-partition is its one "ledger"
// (ledgerId = the log id), positions are log:offset, cursors are the
// subscriptions' durable cursors (kept in the metadata store, hence no
// cursor ledger). The field "lakegate" — which Pulsar's tools ignore — lists
// the WAL chunks and table (Parquet) files that hold the log, and the
// cursors in offsets.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// internalStatsChunksMax bounds the chunks one internal stats answer lists.
const internalStatsChunksMax = 1000

// internalStatsRangesMax bounds the acknowledged ranges a cursor's
// individuallyDeletedMessages shows.
const internalStatsRangesMax = 1000

// ledgerInfoJSON is Pulsar's ManagedLedgerInternalStats.LedgerInfo.
type ledgerInfoJSON struct {
	LedgerID        int64  `json:"ledgerId"`
	Entries         int64  `json:"entries"`
	Size            int64  `json:"size"`
	Offloaded       bool   `json:"offloaded"`
	Metadata        string `json:"metadata,omitempty"`
	UnderReplicated bool   `json:"underReplicated"`
}

// cursorStatsJSON is Pulsar's ManagedLedgerInternalStats.CursorStats.
type cursorStatsJSON struct {
	MarkDeletePosition                       string           `json:"markDeletePosition"`
	ReadPosition                             string           `json:"readPosition"`
	WaitingReadOp                            bool             `json:"waitingReadOp"`
	PendingReadOps                           int              `json:"pendingReadOps"`
	MessagesConsumedCounter                  int64            `json:"messagesConsumedCounter"`
	CursorLedger                             int64            `json:"cursorLedger"`
	CursorLedgerLastEntry                    int64            `json:"cursorLedgerLastEntry"`
	IndividuallyDeletedMessages              string           `json:"individuallyDeletedMessages"`
	LastLedgerSwitchTimestamp                string           `json:"lastLedgerSwitchTimestamp"`
	State                                    string           `json:"state"`
	Active                                   bool             `json:"active"`
	NumberOfEntriesSinceFirstNotAckedMessage int64            `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	TotalNonContiguousDeletedMessagesRange   int              `json:"totalNonContiguousDeletedMessagesRange"`
	SubscriptionHavePendingRead              bool             `json:"subscriptionHavePendingRead"`
	SubscriptionHavePendingReplayRead        bool             `json:"subscriptionHavePendingReplayRead"`
	Properties                               map[string]int64 `json:"properties"`
}

// internalStatsJSON is Pulsar's PersistentTopicInternalStats plus the
// lakegate section.
type internalStatsJSON struct {
	EntriesAddedCounter                int64                      `json:"entriesAddedCounter"`
	NumberOfEntries                    int64                      `json:"numberOfEntries"`
	TotalSize                          int64                      `json:"totalSize"`
	CurrentLedgerEntries               int64                      `json:"currentLedgerEntries"`
	CurrentLedgerSize                  int64                      `json:"currentLedgerSize"`
	LastLedgerCreatedTimestamp         string                     `json:"lastLedgerCreatedTimestamp"`
	LastLedgerCreationFailureTimestamp string                     `json:"lastLedgerCreationFailureTimestamp,omitempty"`
	WaitingCursorsCount                int                        `json:"waitingCursorsCount"`
	PendingAddEntriesCount             int                        `json:"pendingAddEntriesCount"`
	LastConfirmedEntry                 string                     `json:"lastConfirmedEntry"`
	State                              string                     `json:"state"`
	Ledgers                            []ledgerInfoJSON           `json:"ledgers"`
	Cursors                            map[string]cursorStatsJSON `json:"cursors"`
	SchemaLedgers                      []ledgerInfoJSON           `json:"schemaLedgers"`
	CompactedLedger                    ledgerInfoJSON             `json:"compactedLedger"`
	Lakegate                           lakegateLogJSON            `json:"lakegate"`
}

// lakegateLogJSON is the lakegate section of internal stats: the log in
// offsets, where its records are stored, and its cursors.
type lakegateLogJSON struct {
	Log         int64 `json:"log"`
	FirstOffset int64 `json:"firstOffset"`
	NextOffset  int64 `json:"nextOffset"`
	Fenced      bool  `json:"fenced"`
	// Chunks lists the stored chunks from FirstOffset on, at most
	// internalStatsChunksMax (ChunksTruncated then).
	Chunks          []chunkJSON                   `json:"chunks"`
	ChunksTruncated bool                          `json:"chunksTruncated"`
	WALChunks       int                           `json:"walChunks"`
	TableFiles      int                           `json:"tableFiles"`
	Cursors         map[string]lakegateCursorJSON `json:"cursors"`
}

type chunkJSON struct {
	Kind         string `json:"kind"`
	FirstOffset  int64  `json:"firstOffset"`
	EndOffset    int64  `json:"endOffset"`
	Entries      int64  `json:"entries"`
	Bytes        int64  `json:"bytes"`
	Object       string `json:"object"`
	MinPublishMs int64  `json:"minPublishTime"`
	MaxPublishMs int64  `json:"maxPublishTime"`
	Folded       bool   `json:"folded"`
}

type lakegateCursorJSON struct {
	MarkDeleteOffset          int64      `json:"markDeleteOffset"`
	PersistedMarkDeleteOffset int64      `json:"persistedMarkDeleteOffset"`
	AckedRanges               [][2]int64 `json:"ackedRanges"`
	BacklogRecords            int64      `json:"backlogRecords"`
	Consumers                 int        `json:"consumers"`
	Running                   bool       `json:"running"`
}

// partitionedInternalStatsJSON is Pulsar's PartitionedTopicInternalStats.
type partitionedInternalStatsJSON struct {
	Metadata   partitionedMetadata        `json:"metadata"`
	Partitions map[string]json.RawMessage `json:"partitions"`
}

// internalStats serves GET …/{topic}/internalStats.
func (a *admin) internalStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		err = fmt.Errorf("%w: %s is a partitioned topic: use partitioned-stats-internal, or the internal stats of a partition", errAdminMethodNotAllowed, ref.name)
	}
	if err != nil {
		return nil, err
	}
	ts, err := a.topics(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	return topicInternalStats(r.Context(), ts[0])
}

// partitionedInternalStats serves GET …/{topic}/partitioned-internalStats:
// each partition's internal stats, from its owner.
func (a *admin) partitionedInternalStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && !ref.partitioned() {
		err = fmt.Errorf("%w: partitioned topic %s not found (it is not partitioned: use stats-internal)", errAdminNotFound, ref.name)
	}
	if err != nil {
		return nil, err
	}
	rs, err := a.fanOut(r, ref, "/internalStats")
	if err != nil {
		return nil, err
	}
	out := partitionedInternalStatsJSON{
		Metadata:   partitionedMetadata{Partitions: ref.md.Partitioning.NumPartitions},
		Partitions: map[string]json.RawMessage{},
	}
	for _, res := range rs {
		if !res.ok() {
			return nil, res.err()
		}
		out.Partitions[partitionName(ref.name, res.partition)] = json.RawMessage(res.body.Bytes())
	}
	return out, nil
}

// position is a log offset as Pulsar writes a position: ledger:entry.
func position(log lakestream.LogID, off int64) string {
	return strconv.FormatInt(int64(log), 10) + ":" + strconv.FormatInt(off, 10)
}

// topicInternalStats builds one topic-partition's internal stats.
func topicInternalStats(ctx context.Context, t broker.ServedTopic) (internalStatsJSON, error) {
	log := t.Log()
	id := log.ID()
	first, err := log.FirstOffset(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	next, err := log.NextOffset(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	fenced, err := log.Fenced(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	last, err := t.LastMessageID(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	lg := lakegateLogJSON{Log: int64(id), FirstOffset: first, NextOffset: next, Fenced: fenced,
		Chunks: []chunkJSON{}, Cursors: map[string]lakegateCursorJSON{}}
	var entries, size int64
	if ll, ok := log.(lakestream.LogLayout); ok {
		cs, err := ll.Layout(ctx, first, internalStatsChunksMax+1)
		if err != nil {
			return internalStatsJSON{}, err
		}
		if len(cs) > internalStatsChunksMax {
			cs, lg.ChunksTruncated = cs[:internalStatsChunksMax], true
		}
		for _, c := range cs {
			lg.Chunks = append(lg.Chunks, chunkJSON{Kind: c.Kind, FirstOffset: c.First, EndOffset: c.End, Entries: c.Entries,
				Bytes: c.PayloadBytes, Object: c.Object, MinPublishMs: c.MinPublishMs, MaxPublishMs: c.MaxPublishMs, Folded: c.Folded})
			entries += c.Entries
			size += c.PayloadBytes
			if c.Kind == "parquet" {
				lg.TableFiles++
			} else {
				lg.WALChunks++
			}
		}
	}
	state := "LedgerOpened"
	if fenced {
		state = "Terminated"
	}
	out := internalStatsJSON{
		EntriesAddedCounter: entries, NumberOfEntries: entries, TotalSize: size,
		CurrentLedgerEntries: entries, CurrentLedgerSize: size,
		LastConfirmedEntry: position(id, last.EntryID), State: state,
		Ledgers: []ledgerInfoJSON{{LedgerID: int64(id), Entries: entries, Size: size,
			Metadata: fmt.Sprintf("lakegate log %d: offsets [%d, %d), %d WAL chunks, %d table files", id, first, next, lg.WALChunks, lg.TableFiles)}},
		Cursors:         map[string]cursorStatsJSON{},
		SchemaLedgers:   []ledgerInfoJSON{},
		CompactedLedger: ledgerInfoJSON{LedgerID: -1, Entries: -1, Size: -1},
	}
	names, err := t.SubscriptionNames(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	for _, name := range names {
		info, err := t.SubscriptionInfo(ctx, name)
		if err != nil {
			continue // deleted meanwhile
		}
		backlog := info.UnackedRecords(first, next)
		running := t.LiveSubscription(name) != nil
		out.Cursors[name] = cursorStats(id, info, first, next, backlog)
		out.WaitingCursorsCount += boolInt(info.Consumers > 0 && backlog == 0)
		lg.Cursors[name] = lakegateCursorJSON{MarkDeleteOffset: info.MarkDeleteOffset, PersistedMarkDeleteOffset: info.PersistedMarkDeleteOffset,
			AckedRanges: nonNilRanges(info.AckedRanges), BacklogRecords: backlog, Consumers: info.Consumers, Running: running}
	}
	out.Lakegate = lg
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nonNilRanges(rs [][2]int64) [][2]int64 {
	if rs == nil {
		return [][2]int64{}
	}
	return rs
}

// cursorStats is one subscription's cursor as Pulsar's CursorStats: the
// mark-delete position is the last record acknowledged in order, the read
// position the first record not acknowledged after it, and
// individuallyDeletedMessages the acknowledged ranges above it written as
// Pulsar writes them, (from..to] in positions.
func cursorStats(id lakestream.LogID, info actors.SubscriptionInfo, first, next, backlog int64) cursorStatsJSON {
	md := max(info.MarkDeleteOffset, first-1)
	read := md + 1
	for _, r := range info.AckedRanges {
		if r[0] <= read && read < r[1] {
			read = r[1]
		}
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range info.AckedRanges {
		if i == internalStatsRangesMax {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%s..%s]", position(id, r[0]-1), position(id, r[1]-1))
	}
	b.WriteByte(']')
	state := "Open"
	return cursorStatsJSON{
		MarkDeletePosition:                       position(id, md),
		ReadPosition:                             position(id, min(read, next)),
		MessagesConsumedCounter:                  max(0, next-first-backlog),
		CursorLedger:                             -1,
		CursorLedgerLastEntry:                    -1,
		IndividuallyDeletedMessages:              b.String(),
		State:                                    state,
		Active:                                   info.Consumers > 0,
		NumberOfEntriesSinceFirstNotAckedMessage: max(0, next-read),
		TotalNonContiguousDeletedMessagesRange:   len(info.AckedRanges),
		Properties:                               map[string]int64{},
	}
}
