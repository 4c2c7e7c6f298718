package actors

// Compaction once across a cluster (docs/cluster.md, "Compaction"): every
// stream's table is compacted by one node at a time, its compaction owner.
// The unit of ownership is the table, not the log: all partitions of a
// topic commit to one Delta table and one Iceberg table, so one node
// compacting them all never races itself across nodes for the table's
// commits (and serializes them locally), and the work is spread over nodes
// by tables.
//
// Units, through lakestream.Membership (owner keys on session leases):
//
//	compactors/<member id>   held by every node running a compaction worker:
//	                         the candidates (nodes with tables.compaction
//	                         false are members but never candidates)
//	tables/<tenant>/<ns>/<topic>
//	                         the table's compaction owner
//
// Each catalog scan, a node computes the placement of every table over the
// live candidates (rendezvous hashing), acquires the tables placed on it
// that nobody owns, releases the ones it owns that are placed elsewhere (a
// node joined), and compacts only the tables it owns. A node that dies
// loses its units with its session (cluster.sessionTtl); the next scan of
// the others places its tables on them. The claim protocol makes a
// hand-over safe at any point: a range the old owner claimed and did not
// finish is resumed by the new one (docs/compaction.md, "Crash safety").

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"strings"

	"github.com/lakegate/lakegate/lakestream"
)

// Unit name prefixes of compaction ownership.
const (
	compactorUnitPrefix = "compactors/"
	tableUnitPrefix     = "tables/"
)

// TableUnit is the ownership unit of a stream's table compaction.
func TableUnit(s lakestream.StreamIdentifier) string { return tableUnitPrefix + s.String() }

// IsMaterializationUnit reports whether an ownership unit is the compaction
// worker's (not a topic): the gateway must not hand it over as a topic.
func IsMaterializationUnit(unit string) bool {
	return strings.HasPrefix(unit, compactorUnitPrefix) || strings.HasPrefix(unit, tableUnitPrefix)
}

// PlaceTable returns the candidate a table unit is placed on: the highest
// rendezvous hash of (unit, member id); "" with no candidates. Pure.
func PlaceTable(unit string, candidates []string) string {
	best, bestH := "", uint64(0)
	for _, c := range candidates {
		h := fnv.New64a()
		h.Write([]byte(unit))
		h.Write([]byte{0})
		h.Write([]byte(c))
		if v := h.Sum64(); best == "" || v > bestH || (v == bestH && c < best) {
			best, bestH = c, v
		}
	}
	return best
}

// clusterJobs keeps the jobs of the tables this node owns, acquiring and
// releasing table units as placement says (one catalog scan's worth). It
// returns the jobs to schedule and the tables owned.
func clusterJobs(ctx context.Context, m lakestream.Membership, jobs []lakestream.MaterializationJob, log *slog.Logger) ([]lakestream.MaterializationJob, int, error) {
	self := m.Self().ID
	if _, err := m.Acquire(ctx, compactorUnitPrefix+self); err != nil {
		return nil, 0, err
	}
	members, err := m.Members(ctx)
	if err != nil {
		return nil, 0, err
	}
	var candidates []string
	for _, mb := range members {
		if mb.ID == self {
			candidates = append(candidates, self)
			continue
		}
		owner, ok, err := m.Owner(ctx, compactorUnitPrefix+mb.ID)
		if err != nil {
			return nil, 0, err
		}
		if ok && owner.ID == mb.ID {
			candidates = append(candidates, mb.ID)
		}
	}
	owned := map[string]lakestream.Ownership{}
	for _, o := range m.Owned() {
		if strings.HasPrefix(o.Unit(), tableUnitPrefix) {
			owned[o.Unit()] = o
		}
	}
	byUnit := map[string][]lakestream.MaterializationJob{}
	for _, j := range jobs {
		u := TableUnit(j.Stream)
		byUnit[u] = append(byUnit[u], j)
	}
	var out []lakestream.MaterializationJob
	tables := 0
	for u, js := range byUnit {
		placed := PlaceTable(u, candidates)
		if placed != self {
			if o, ok := owned[u]; ok {
				// Placed elsewhere now (a node joined): hand it over; the
				// new owner acquires it on its next scan.
				log.Info("compaction: handing a table over", "table", u, "to", placed)
				_ = o.Release(ctx)
			}
			continue
		}
		if _, ok := owned[u]; !ok {
			if _, err := m.Acquire(ctx, u); err != nil {
				if !errors.Is(err, lakestream.ErrOwned) {
					log.Warn("compaction: acquiring a table", "table", u, "err", err)
				}
				continue // its previous owner still has it; next scan
			}
			log.Info("compaction: this node compacts a table", "table", u)
		}
		tables++
		out = append(out, js...)
	}
	// Tables no longer materialized: give them up.
	for u, o := range owned {
		if _, ok := byUnit[u]; !ok {
			_ = o.Release(ctx)
		}
	}
	return out, tables, nil
}
