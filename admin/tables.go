package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// tableInfoJSON is the answer of GET …/{topic}/table: a lakegate extension
// of the admin API describing the topic's tables (docs/compaction.md).
type tableInfoJSON struct {
	Topic      string               `json:"topic"`
	Location   string               `json:"location"`
	Formats    []tableFormatJSON    `json:"formats"`
	Partitions []tablePartitionJSON `json:"partitions"`
	// Retention is the table retention: the resolved policy and the last
	// run its compaction owner recorded.
	Retention tableRetentionJSON `json:"retention"`
}

// tableRetentionJSON is the table retention of GET …/{topic}/table
// (docs/compaction.md, "Table retention"): the policy resolved stream →
// namespace → cluster default (0: no limit) and the last run, null when
// none ran yet.
type tableRetentionJSON struct {
	RetentionMs    int64                  `json:"retentionMs"`
	RetentionBytes int64                  `json:"retentionBytes"`
	LastRun        *tableRetentionRunJSON `json:"lastRun"`
}

type tableRetentionRunJSON struct {
	TimestampMs    int64 `json:"timestamp"`
	RetentionMs    int64 `json:"retentionMs"`
	RetentionBytes int64 `json:"retentionBytes"`
	FilesRemoved   int   `json:"filesRemoved"`
	BytesRemoved   int64 `json:"bytesRemoved"`
	FilesHeld      int   `json:"filesHeld"`
	LiveBytes      int64 `json:"liveBytes"`
}

type tableFormatJSON struct {
	Format        string `json:"format"`
	URI           string `json:"uri"`
	Identifier    string `json:"identifier,omitempty"`
	Version       int64  `json:"version"`
	FormatVersion string `json:"formatVersion"`
	Rows          int64  `json:"rows"`
	Files         int    `json:"files"`
	LastCommitMs  int64  `json:"lastCommitTimestamp"`
}

type tablePartitionJSON struct {
	Partition    int   `json:"partition"`
	Log          int64 `json:"log"`
	CompactedEnd int64 `json:"compactedEndOffset"`
	LogEnd       int64 `json:"logEndOffset"`
	// Lag is the records of the log not yet in the table.
	Lag int64 `json:"lag"`
	// LagSeconds is the age of the oldest of them (now minus the time it
	// was written), 0 when the table holds the whole log: the
	// lakegate_table_lag_seconds of docs/metrics.md.
	LagSeconds float64 `json:"lagSeconds"`
}

// tableInfo answers GET …/{topic}/table for a topic (partitioned or not;
// a partition's name answers for its whole topic).
func (a *admin) tableInfo(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), adminRequestTimeout)
	defer cancel()
	id, err := a.topicTableStream(r)
	if err != nil {
		return nil, err
	}
	s, err := a.cat.Stream(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := s.Table().Info(ctx)
	if err != nil {
		return nil, err
	}
	out := tableInfoJSON{Topic: "persistent://" + id.Namespace + "/" + id.Name, Location: info.Location,
		Formats: []tableFormatJSON{}, Partitions: []tablePartitionJSON{}}
	for _, f := range info.Formats {
		out.Formats = append(out.Formats, tableFormatJSON{Format: string(f.Format), URI: f.URI, Identifier: f.Identifier,
			Version: f.Version, FormatVersion: f.FormatVersion, Rows: f.Rows, Files: f.Files, LastCommitMs: f.LastCommitMs})
	}
	for _, p := range info.Partitions {
		pj := tablePartitionJSON{Partition: p.Partition, Log: int64(p.Log),
			CompactedEnd: p.CompactedEnd, LogEnd: p.LogEnd, Lag: max(0, p.LogEnd-p.CompactedEnd)}
		if pj.Lag > 0 {
			if pj.LagSeconds, err = tableLagSeconds(ctx, s, max(p.Partition, 0), p.CompactedEnd); err != nil {
				return nil, err
			}
		}
		out.Partitions = append(out.Partitions, pj)
	}
	pol, err := a.cat.ResolveMaterialization(ctx, id)
	if err != nil {
		return nil, err
	}
	if pol.RetentionMs != nil {
		out.Retention.RetentionMs = *pol.RetentionMs
	}
	if pol.RetentionBytes != nil {
		out.Retention.RetentionBytes = *pol.RetentionBytes
	}
	if lr := info.LastRetention; lr != nil {
		out.Retention.LastRun = &tableRetentionRunJSON{TimestampMs: lr.AtMs, RetentionMs: lr.RetentionMs,
			RetentionBytes: lr.RetentionBytes, FilesRemoved: lr.FilesRemoved, BytesRemoved: lr.BytesRemoved,
			FilesHeld: lr.FilesHeld, LiveBytes: lr.LiveBytes}
	}
	return out, nil
}

// tableLagSeconds is the age of the record at offset end of partition's
// log (the first one not in the table), or of the log's first record when
// end is trimmed already.
func tableLagSeconds(ctx context.Context, s lakestream.Stream, partition int, end int64) (float64, error) {
	l, err := s.Log(ctx, partition)
	if err != nil {
		return 0, err
	}
	h, err := l.EntryHeader(ctx, end)
	if errors.Is(err, lakestream.ErrOffsetTrimmed) {
		var first int64
		if first, err = l.FirstOffset(ctx); err == nil {
			h, err = l.EntryHeader(ctx, first)
		}
	}
	if err != nil {
		return 0, err
	}
	return max(0, time.Since(time.UnixMilli(h.WriteTimeMs)).Seconds()), nil
}

// tablePolicyJSON is the body of the table-policy endpoints (a lakegate
// extension): whether a topic (or every topic of a namespace) becomes
// tables, and in which formats.
//
//	GET    …/persistent/{t}/{ns}/{topic}/tablePolicy   → the topic's own policy, or the applied one with ?applied=true
//	POST   …/persistent/{t}/{ns}/{topic}/tablePolicy   body {"enabled": true, "formats": ["DELTA", "ICEBERG"]}
//	DELETE …/persistent/{t}/{ns}/{topic}/tablePolicy   (inherit the namespace's, then the cluster default)
//	GET|POST|DELETE /admin/v2/namespaces/{t}/{ns}/tablePolicy
//
// Unset fields inherit. The compaction worker picks a change up at its next
// catalog scan (tables.scanInterval).
//
// retentionMs and retentionBytes are the table retention (docs/compaction.md,
// "Table retention"): files whose newest row is older than retentionMs, and
// the oldest files while the table exceeds retentionBytes, are removed from
// the tables and trimmed from the topic; 0 is no limit (overriding an
// inherited one), absent inherits.
type tablePolicyJSON struct {
	Enabled        *bool    `json:"enabled,omitempty"`
	Formats        []string `json:"formats,omitempty"`
	RetentionMs    *int64   `json:"retentionMs,omitempty"`
	RetentionBytes *int64   `json:"retentionBytes,omitempty"`
}

func policyJSON(p *lakestream.TableMaterializationPolicy) *tablePolicyJSON {
	if p == nil {
		return nil
	}
	return &tablePolicyJSON{Enabled: p.Enabled, Formats: p.Catalogs, RetentionMs: p.RetentionMs, RetentionBytes: p.RetentionBytes}
}

// readTablePolicy parses and checks a policy body.
func (a *admin) readTablePolicy(r *http.Request) (*lakestream.TableMaterializationPolicy, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: the body must be a policy like {\"enabled\": true, \"formats\": [\"DELTA\"]}", errAdminBadRequest)
	}
	var pj tablePolicyJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pj); err != nil {
		return nil, fmt.Errorf("%w: table policy: %v", errAdminBadRequest, err)
	}
	p := &lakestream.TableMaterializationPolicy{Enabled: pj.Enabled, RetentionMs: pj.RetentionMs, RetentionBytes: pj.RetentionBytes}
	for _, f := range pj.Formats {
		switch strings.ToUpper(f) {
		case string(lakestream.TableDelta), string(lakestream.TableIceberg):
			p.Catalogs = append(p.Catalogs, strings.ToUpper(f))
		default:
			// A registered table catalog's name is accepted as is.
			if _, err := a.cat.GetTableCatalog(r.Context(), f); err != nil {
				return nil, fmt.Errorf("%w: table policy: format %q is not DELTA, ICEBERG or a registered table catalog", errAdminBadRequest, f)
			}
			p.Catalogs = append(p.Catalogs, f)
		}
	}
	return p, nil
}

// topicTableStream resolves the stream of a topic path (a partition's name
// answers for its topic).
func (a *admin) topicTableStream(r *http.Request) (lakestream.StreamIdentifier, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return lakestream.StreamIdentifier{}, err
	}
	return ref.md.ID, nil
}

func (a *admin) getTopicTablePolicy(r *http.Request) (any, error) {
	id, err := a.topicTableStream(r)
	if err != nil {
		return nil, err
	}
	if queryBool(r, "applied") {
		p, err := a.cat.ResolveMaterialization(r.Context(), id)
		if err != nil {
			return nil, err
		}
		return policyJSON(&p), nil
	}
	md, err := a.cat.LoadStream(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return policyJSON(md.Materialization), nil
}

func (a *admin) setTopicTablePolicy(r *http.Request) (any, error) {
	id, err := a.topicTableStream(r)
	if err == nil {
		var p *lakestream.TableMaterializationPolicy
		if p, err = a.readTablePolicy(r); err == nil {
			err = a.cat.SetStreamMaterialization(r.Context(), id, p)
		}
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) removeTopicTablePolicy(r *http.Request) (any, error) {
	id, err := a.topicTableStream(r)
	if err == nil {
		err = a.cat.SetStreamMaterialization(r.Context(), id, nil)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) getNamespaceTablePolicy(r *http.Request) (any, error) {
	ns, err := a.cat.LoadNamespace(r.Context(), r.PathValue("tenant")+"/"+r.PathValue("ns"))
	if err != nil {
		return nil, err
	}
	return policyJSON(ns.Materialization), nil
}

func (a *admin) setNamespaceTablePolicy(r *http.Request) (any, error) {
	p, err := a.readTablePolicy(r)
	if err == nil {
		err = a.cat.SetNamespaceMaterialization(r.Context(), r.PathValue("tenant")+"/"+r.PathValue("ns"), p)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) removeNamespaceTablePolicy(r *http.Request) (any, error) {
	if err := a.cat.SetNamespaceMaterialization(r.Context(), r.PathValue("tenant")+"/"+r.PathValue("ns"), nil); err != nil {
		return nil, err
	}
	return nil, nil
}
