package kafka

// Expiry of transactional.ids (docs/kafka.md, "Transactions"), as Kafka's
// transactional.id.expiration.ms: a record last written
// Config.TransactionalIDExpiration ago (producerRecord.UsedMs) with no
// transaction open is deleted, by compare-and-delete on the revision the
// sweep read, so a request that used the id meanwhile wins. The id's next
// request then finds no record: INVALID_PRODUCER_ID_MAPPING for the old
// producer (checkEpoch, checkReinit), a fresh producer id for a new
// InitProducerId.
//
// Each node sweeps the ids whose coordinator it serves (txnCoordinatorOf,
// txn.Coordinator.Serving), under the id's entry lock (txnProducer.mu), so
// the sweep and the id's requests on its coordinator take turns. The
// records are not grouped by coordinator in the store: a sweep reads
// every record, in pages of txnExpiryPage, and decodes only its own.
// Other nodes' cached records need nothing: a deleted record had no
// transaction open, and a cached record lets a Produce or a
// TxnOffsetCommit through only into an open transaction (txnState), whose
// end drops it; any other use reads the record from the store.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lakegate/lakegate/txn"
)

// Bounds of the sweep.
const (
	// txnExpiryPage bounds the records one page of a sweep reads.
	txnExpiryPage = 500
	// txnExpiryIntervalMin and txnExpiryIntervalMax bound the time between
	// two sweeps (a tenth of the expiration between them).
	txnExpiryIntervalMin = 100 * time.Millisecond
	txnExpiryIntervalMax = time.Hour
	// txnExpiryRequestTimeout bounds each call of a sweep.
	txnExpiryRequestTimeout = 10 * time.Second
)

// defaultTransactionalIDExpiration is Kafka's transactional.id.expiration.ms.
const defaultTransactionalIDExpiration = 7 * 24 * time.Hour

// txnExpiryInterval is the time between two sweeps for an expiration: a
// tenth of it, within [txnExpiryIntervalMin, txnExpiryIntervalMax].
func txnExpiryInterval(expiration time.Duration) time.Duration {
	return min(max(expiration/10, txnExpiryIntervalMin), txnExpiryIntervalMax)
}

// expiryAction is what a sweep does with one record.
type expiryAction int

const (
	// expiryKeep: used within the expiration.
	expiryKeep expiryAction = iota
	// expiryStamp: a record written before usedMs existed; its last use
	// is taken to be the sweep's time (written by compare-and-put).
	expiryStamp
	// expiryIfEnded: unused for the expiration but naming a transaction:
	// deleted once that transaction is no longer open (it commits, aborts,
	// or times out by the coordinator's rules first).
	expiryIfEnded
	// expiryDelete: unused for the expiration, no transaction open.
	expiryDelete
)

// judgeExpiry decides a record's fate at nowMs (Unix ms) for an
// expiration of expirationMs.
func judgeExpiry(rec producerRecord, nowMs, expirationMs int64) expiryAction {
	switch {
	case rec.UsedMs <= 0:
		return expiryStamp
	case nowMs-rec.UsedMs < expirationMs:
		return expiryKeep
	case rec.Txn != nil:
		return expiryIfEnded
	}
	return expiryDelete
}

// txnEnded reports whether transaction id is no longer open: ended, or
// forgotten by the coordinator (txn.ErrNotFound).
func txnEnded(ctx context.Context, tc txn.Coordinator, id txn.ID) (bool, error) {
	rec, err := tc.Status(ctx, id)
	switch {
	case errors.Is(err, txn.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	}
	return rec.State.Ended(), nil
}

// txnSweep is one sweep of the transactional.id records.
type txnSweep struct {
	tc    txn.Coordinator
	cache *txnProducers
	// nowMs is the sweep's time, expirationMs the expiration (Unix ms, ms).
	nowMs, expirationMs int64
	log                 *slog.Logger

	coordinators int
	// serving: the coordinators this node serves (true) or that another
	// member does (false; Serve tried once this sweep).
	serving map[uint64]bool
}

// sweepTxnIDs runs one sweep: every record whose coordinator this node
// serves is judged (judgeExpiry) and deleted or stamped. A coordinator no
// member serves (none of its ids used since the cluster started) is
// served by the first node whose sweep finds one of its records expired,
// as a request would. It returns how many ids it deleted.
func sweepTxnIDs(ctx context.Context, tc txn.Coordinator, cache *txnProducers, nowMs, expirationMs int64, log *slog.Logger) (int, error) {
	sw := &txnSweep{tc: tc, cache: cache, nowMs: nowMs, expirationMs: expirationMs, log: log,
		coordinators: tc.Coordinators(), serving: map[uint64]bool{}}
	for _, c := range tc.Serving() {
		sw.serving[c] = true
	}
	deleted := 0
	for after := ""; ; {
		pctx, cancel := context.WithTimeout(ctx, txnExpiryRequestTimeout)
		page, err := tc.ListProducers(pctx, after, txnExpiryPage)
		cancel()
		if err != nil {
			return deleted, err
		}
		for _, p := range page {
			gone, err := sw.one(ctx, p)
			if err != nil {
				if ctx.Err() != nil {
					return deleted, err
				}
				log.Warn("kafka: expiring a transactional.id", "transactional.id", p.TransactionalID, "err", err)
			}
			if gone {
				deleted++
			}
		}
		if len(page) < txnExpiryPage {
			return deleted, nil
		}
		after = page[len(page)-1].TransactionalID
	}
}

// one judges one record and carries the judgement out; it reports
// whether it deleted it.
func (sw *txnSweep) one(ctx context.Context, p txn.Producer) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, txnExpiryRequestTimeout)
	defer cancel()
	coord := txnCoordinatorOf(p.TransactionalID, sw.coordinators)
	if served, tried := sw.serving[coord]; tried && !served {
		return false, nil
	}
	rec, err := decodeProducer(p.Value)
	if err != nil {
		return false, err
	}
	action := judgeExpiry(rec, sw.nowMs, sw.expirationMs)
	if action == expiryKeep {
		return false, nil
	}
	if _, tried := sw.serving[coord]; !tried {
		err := sw.tc.Serve(ctx, coord)
		sw.serving[coord] = err == nil
		if errors.Is(err, txn.ErrNotCoordinator) {
			return false, nil
		}
		if err != nil {
			delete(sw.serving, coord) // tried again at its next record
			return false, err
		}
	}
	if action == expiryIfEnded {
		ended, err := txnEnded(ctx, sw.tc, *rec.Txn)
		if err != nil || !ended {
			return false, err
		}
	}
	// Under the id's lock: the sweep and the id's requests here take
	// turns, and a request that held the record before the sweep reads it
	// from the store again (e.loaded false).
	e := sw.cache.entry(p.TransactionalID)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loaded = false
	defer sw.cache.forget(p.TransactionalID, e) // the sweep fills no cache
	if action == expiryStamp {
		rec.UsedMs = sw.nowMs
		_, _, err := sw.tc.SaveProducer(ctx, p.TransactionalID, encodeProducer(rec), p.Rev)
		return false, err // not saved: used meanwhile, so stamped
	}
	ok, err := sw.tc.DeleteProducer(ctx, p.TransactionalID, p.Rev)
	if err != nil || !ok {
		return false, err // changed meanwhile: used, judged again next sweep
	}
	sw.log.Debug("kafka: transactional.id expired", "transactional.id", p.TransactionalID, "usedMs", rec.UsedMs)
	return true, nil
}

// forget drops tid's cached entry if it is still e.
func (tp *txnProducers) forget(tid string, e *txnProducer) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.mu.m[tid] == e {
		delete(tp.mu.m, tid)
	}
}

// expireTxnIDs sweeps the transactional.id records every
// txnExpiryInterval while the server runs (transactions on).
func (s *Server) expireTxnIDs() {
	expiration := s.cfg.TransactionalIDExpiration
	tick := time.NewTicker(txnExpiryInterval(expiration))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			tc, err := s.txnTC()
			if err != nil {
				continue
			}
			n, err := sweepTxnIDs(s.ctx, tc, &s.txns, now.UnixMilli(), expiration.Milliseconds(), s.log)
			s.metrics.txnIDsExpired.Add(float64(n))
			if n > 0 {
				s.log.Info("kafka: transactional.ids expired", "count", n, "expiration", expiration)
			}
			if err != nil && s.ctx.Err() == nil {
				s.log.Warn("kafka: sweeping expired transactional.ids", "err", err)
			}
		}
	}
}
