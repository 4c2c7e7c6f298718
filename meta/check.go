package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// checkTxn validates a Txn request the way etcd's server does (see
// checkTxnRequest and checkIntervals in etcd's v3rpc/key.go), so that Mem
// and Etcd reject the same requests with the same sentinels: the op count
// first (ErrTooManyOps), then empty keys and keys written twice
// (ErrInvalid). Two deletes may overlap; a put may not meet another put of
// its key or a delete covering it.
//
// It also bounds the request's size, estimated by txnBytes, by
// maxRequestBytes (ErrTooManyOps), as etcd's --max-request-bytes does.
func checkTxn(cmps []Cmp, ops []Op, maxTxnOps, maxRequestBytes int) error {
	if len(cmps) > maxTxnOps || len(ops) > maxTxnOps {
		return fmt.Errorf("%w: %d compares, %d ops, limit %d", ErrTooManyOps, len(cmps), len(ops), maxTxnOps)
	}
	if n := txnBytes(cmps, ops); n > maxRequestBytes {
		return fmt.Errorf("%w: request of about %d bytes, limit %d", ErrTooManyOps, n, maxRequestBytes)
	}
	for _, c := range cmps {
		if c.Key == "" {
			return fmt.Errorf("%w: empty key in compare", ErrInvalid)
		}
		if c.ModRevision < 0 {
			return fmt.Errorf("%w: negative ModRevision %d in compare of %q", ErrInvalid, c.ModRevision, c.Key)
		}
	}
	var puts map[string]struct{}
	for _, op := range ops {
		if op.Key == "" {
			return fmt.Errorf("%w: empty key in op", ErrInvalid)
		}
		switch op.Kind {
		case OpPut:
			if puts == nil {
				puts = make(map[string]struct{}, len(ops))
			}
			if _, dup := puts[op.Key]; dup {
				return fmt.Errorf("%w: key %q put twice in one txn", ErrInvalid, op.Key)
			}
			puts[op.Key] = struct{}{}
		case OpDelete, OpDeletePrefix:
		default:
			return fmt.Errorf("%w: unknown op kind %d", ErrInvalid, op.Kind)
		}
	}
	if puts == nil {
		return nil
	}
	for _, op := range ops {
		switch op.Kind {
		case OpDelete:
			if _, hit := puts[op.Key]; hit {
				return fmt.Errorf("%w: key %q put and deleted in one txn", ErrInvalid, op.Key)
			}
		case OpDeletePrefix:
			for k := range puts {
				if strings.HasPrefix(k, op.Key) {
					return fmt.Errorf("%w: key %q put and deleted (prefix %q) in one txn", ErrInvalid, k, op.Key)
				}
			}
		}
	}
	return nil
}

// requestOverheadBytes is what txnBytes counts for the framing of one
// compare or op (protobuf tags and lengths, the compare's target and
// result), a little more than etcd's encoding takes.
const requestOverheadBytes = 16

// txnBytes estimates the encoded size of a Txn request: its keys and values
// plus requestOverheadBytes per compare and op.
func txnBytes(cmps []Cmp, ops []Op) int {
	n := 0
	for _, c := range cmps {
		n += len(c.Key) + requestOverheadBytes
	}
	for _, op := range ops {
		n += len(op.Key) + len(op.Value) + requestOverheadBytes
	}
	return n
}

// ctxErr maps a done context to the package's errors: a passed deadline is
// ErrUnavailable (the store did not answer in time), a cancellation wraps
// context.Canceled.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("meta: %w", err)
}
