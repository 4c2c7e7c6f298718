package tc

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/txn"
)

// SaveAcks makes the pending acknowledgements of transaction id on a
// subscription durable (value: the subscription's encoding of them), so
// that whichever node owns the subscription when the transaction ends
// applies or drops them.
func (c *Coordinator) SaveAcks(ctx context.Context, topic, sub string, id txn.ID, value []byte) error {
	_, _, err := c.cfg.Meta.Txn(ctx, nil, []meta.Op{meta.Put(c.k.acks(topic, sub, id), value)})
	return err
}

// DeleteAcks forgets them, once the subscription applied them to its
// cursor (and persisted it) or dropped them.
func (c *Coordinator) DeleteAcks(ctx context.Context, topic, sub string, id txn.ID) error {
	_, _, err := c.cfg.Meta.Txn(ctx, nil, []meta.Op{meta.Delete(c.k.acks(topic, sub, id))})
	return err
}

// LoadAcks returns the pending acknowledgements saved for a subscription,
// by transaction (a new owner loads them before it serves).
func (c *Coordinator) LoadAcks(ctx context.Context, topic, sub string) (map[txn.ID][]byte, error) {
	p := c.k.acksPrefix(topic, sub)
	kvs, err := c.cfg.Meta.Range(ctx, p, p+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make(map[txn.ID][]byte, len(kvs))
	for _, kv := range kvs {
		id, ok := parseAcksID(strings.TrimPrefix(kv.Key, p))
		if !ok {
			return nil, fmt.Errorf("txn: corrupt pending-ack key %q", kv.Key)
		}
		out[id] = kv.Value
	}
	return out, nil
}

// LoadProducer reads a Kafka transactional.id's record (rev 0: none).
func (c *Coordinator) LoadProducer(ctx context.Context, transactionalID string) ([]byte, int64, error) {
	kv, found, err := c.cfg.Meta.Get(ctx, c.k.producer(transactionalID))
	if err != nil || !found {
		return nil, 0, err
	}
	return kv.Value, kv.ModRevision, nil
}

// SaveProducer writes a Kafka transactional.id's record iff it is still
// at rev (0: absent).
func (c *Coordinator) SaveProducer(ctx context.Context, transactionalID string, value []byte, rev int64) (bool, int64, error) {
	key := c.k.producer(transactionalID)
	return c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: rev}}, []meta.Op{meta.Put(key, value)})
}

// ListProducers returns a page of the Kafka transactional.id records,
// after transactional.id after (txn.Coordinator.ListProducers).
func (c *Coordinator) ListProducers(ctx context.Context, after string, limit int) ([]txn.Producer, error) {
	if limit <= 0 || limit > txn.MaxProducersPage {
		limit = txn.MaxProducersPage
	}
	p := c.k.producerPrefix()
	start := p
	if after != "" {
		start = c.k.producer(after) + "\x00" // the escaping is one to one: the next key
	}
	kvs, err := c.cfg.Meta.Range(ctx, start, p+"\xff", limit)
	if err != nil {
		return nil, err
	}
	out := make([]txn.Producer, 0, len(kvs))
	for _, kv := range kvs {
		tid, err := url.PathUnescape(strings.TrimPrefix(kv.Key, p))
		if err != nil {
			return nil, fmt.Errorf("txn: corrupt transactional.id key %q: %w", kv.Key, err)
		}
		out = append(out, txn.Producer{TransactionalID: tid, Value: kv.Value, Rev: kv.ModRevision})
	}
	return out, nil
}

// DeleteProducer deletes a Kafka transactional.id's record iff it is
// still at rev.
func (c *Coordinator) DeleteProducer(ctx context.Context, transactionalID string, rev int64) (bool, error) {
	if rev <= 0 {
		return false, fmt.Errorf("%w: deleting transactional.id %q at revision %d", meta.ErrInvalid, transactionalID, rev)
	}
	key := c.k.producer(transactionalID)
	ok, _, err := c.cfg.Meta.Txn(ctx, []meta.Cmp{{Key: key, ModRevision: rev}}, []meta.Op{meta.Delete(key)})
	return ok, err
}

// Await calls fn once, from the coordinator's goroutine, when transaction
// id has ended (committed: its outcome), on whichever node ended it. A
// transaction that has already ended, or does not exist (aborted: nothing
// of it can commit), is reported at once. fn must not block.
func (c *Coordinator) Await(ctx context.Context, id txn.ID, fn func(committed bool)) error {
	c.awaitMu.Lock()
	c.awaits[id] = append(c.awaits[id], fn)
	c.awaitMu.Unlock()
	// Registered before reading: an end after the read reaches the watch.
	rec, err := c.Status(ctx, id)
	switch {
	case err == nil && rec.State.Ended():
		c.fire(id, rec.State == txn.Committed)
	case err == nil:
	case isNotFound(err):
		c.fire(id, false)
	default:
		return err
	}
	return nil
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, txn.ErrNotFound) }

// fire calls and forgets the waiters of id.
func (c *Coordinator) fire(id txn.ID, committed bool) {
	c.awaitMu.Lock()
	fns := c.awaits[id]
	delete(c.awaits, id)
	c.awaitMu.Unlock()
	for _, fn := range fns {
		fn(committed)
	}
}

// watchLoop follows the transaction records and fires the waiters of
// those that end. When the watch restarts it re-reads the records of every
// transaction waited for, so an end it missed is not lost.
func (c *Coordinator) watchLoop() {
	defer c.wg.Done()
	for c.ctx.Err() == nil {
		_, rev, err := c.cfg.Meta.Txn(c.ctx, nil, nil)
		if err != nil {
			c.pause()
			continue
		}
		c.resync()
		for ev := range c.cfg.Meta.Watch(c.ctx, c.k.txnPrefix(), rev) {
			if ev.Kind != meta.EventPut {
				continue
			}
			id, ok := c.k.idOfRec(ev.KV.Key)
			if !ok {
				continue
			}
			if rec, err := decodeRecord(ev.KV.Value); err == nil && rec.State.Ended() {
				c.fire(id, rec.State == txn.Committed)
			}
		}
	}
}

func (c *Coordinator) resync() {
	c.awaitMu.Lock()
	ids := make([]txn.ID, 0, len(c.awaits))
	for id := range c.awaits {
		ids = append(ids, id)
	}
	c.awaitMu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		rec, err := c.Status(ctx, id)
		cancel()
		switch {
		case err == nil && rec.State.Ended():
			c.fire(id, rec.State == txn.Committed)
		case isNotFound(err):
			c.fire(id, false)
		}
	}
}

func (c *Coordinator) pause() {
	select {
	case <-c.ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}
