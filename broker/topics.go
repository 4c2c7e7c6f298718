package broker

// Topics and partitions in the catalog: what a topic name resolves to
// (without loading or owning anything), auto-creation, partition counts,
// the topics of a namespace.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/lakestream"
)

// PartRef is what a topic name resolves to in the catalog, without loading
// or owning anything.
type PartRef struct {
	// name is the canonical name: a "-partition-N" name that is not a
	// partition of a partitioned stream has Partition -1.
	Name   TopicName
	Stream lakestream.StreamIdentifier
	// index is the log's index in its stream (0 for a non-partitioned
	// topic); partition is the Pulsar partition (-1 for a non-partitioned
	// topic).
	Index     int
	Partition int32
}

// Unit is the name ownership is taken under: the canonical topic name.
func (r PartRef) Unit() string { return r.Name.String() }

// Resolve resolves a topic name to its stream and log. A
// "-partition-N" name is a partition of a partitioned stream if one exists
// under the base name; otherwise the full name is a non-partitioned topic,
// auto-created (when allowed) with create.
func (b *Broker) Resolve(ctx context.Context, name string, create bool) (PartRef, error) {
	tn, err := ParseTopicName(name)
	if err != nil {
		return PartRef{}, err
	}
	if tn.NonPersistent {
		// Callers that may meet a non-persistent topic handle it first.
		return PartRef{}, fmt.Errorf("%w: %s is non-persistent: it has no stream", ErrNotAllowed, tn)
	}
	if tn.Partition < 0 {
		md, err := b.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			return PartRef{}, fmt.Errorf("%w: %s is partitioned: use its partitions (%s%s0...)", ErrNotAllowed, tn, tn, PartitionSuffix)
		}
	} else {
		md, err := b.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		switch {
		case err == nil && md.Partitioning.NumPartitions > 0:
			if tn.Partition >= md.Partitioning.NumPartitions {
				return PartRef{}, fmt.Errorf("%w: %s: stream has %d partitions", lakestream.ErrNoSuchStream, tn, md.Partitioning.NumPartitions)
			}
			return PartRef{Name: tn, Stream: tn.StreamID(), Index: tn.Partition, Partition: int32(tn.Partition)}, nil
		case err != nil && !errors.Is(err, lakestream.ErrNoSuchStream):
			return PartRef{}, err
		}
		tn.Partition = -1 // a non-partitioned topic whose name looks like a partition
	}
	ref := PartRef{Name: tn, Stream: FullStreamID(tn), Partition: -1}
	_, err = b.cfg.Catalog.LoadStream(ctx, ref.Stream)
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) && create {
		if err = b.autoCreate(ctx, tn, ref.Stream); err == nil {
			// Created partitioned (autocreate.go): its name is refused as
			// an existing partitioned topic's is.
			return b.Resolve(ctx, name, false)
		}
	}
	if err != nil {
		return PartRef{}, err
	}
	return ref, nil
}

// isPartitionName reports whether a stream's local name has the form of
// a partition's ("…-partition-N").
func isPartitionName(local string) bool {
	i := strings.LastIndex(local, PartitionSuffix)
	return i > 0 && partitionIndex(local[i+len(PartitionSuffix):]) >= 0
}

// Partitions returns the partition count of a topic name's stream: 0 for a
// non-partitioned topic or a partition; with create, a missing topic is
// auto-created non-partitioned (when allowed).
func (b *Broker) Partitions(ctx context.Context, name string, create bool) (int, error) {
	tn, err := ParseTopicName(name)
	if err != nil {
		return 0, err
	}
	if tn.NonPersistent {
		return 0, nil // never partitioned (nonpersistent.go)
	}
	if tn.Partition >= 0 {
		md, err := b.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			return 0, nil // a partition of a partitioned topic
		}
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			return 0, err
		}
	}
	md, err := b.cfg.Catalog.LoadStream(ctx, FullStreamID(tn))
	if err == nil {
		return md.Partitioning.NumPartitions, nil
	}
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) && create {
		// As its namespace's auto topic creation says (autocreate.go):
		// partitioned, it answers its partition count.
		if err := b.autoCreate(ctx, tn, FullStreamID(tn)); err != nil {
			return 0, err
		}
		md, err := b.cfg.Catalog.LoadStream(ctx, FullStreamID(tn))
		return md.Partitioning.NumPartitions, err
	}
	return 0, err
}

// TopicsOfNamespace lists the topic names of a namespace "tenant/ns",
// sorted; nil for an unknown namespace. Partitioned topics are listed as
// their partitions, or (partitioned) only partitioned topics are listed,
// by their base names.
func (b *Broker) TopicsOfNamespace(ctx context.Context, namespace string, partitioned bool) ([]string, error) {
	if strings.HasPrefix(namespace, "__lakegate/") {
		return nil, nil // the gateway's own bookkeeping (admin tenants), not topics
	}
	ids, err := b.cfg.Catalog.ListStreams(ctx, namespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) || errors.Is(err, lakestream.ErrInvalidArgument) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		md, err := b.cfg.Catalog.LoadStream(ctx, id)
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		if md.State == lakestream.StreamDeleting {
			continue
		}
		base := "persistent://" + id.Namespace + "/" + id.Name
		n := md.Partitioning.NumPartitions
		switch {
		case partitioned && n > 0:
			out = append(out, base)
		case partitioned:
		case n > 0:
			for i := range n {
				out = append(out, base+PartitionSuffix+strconv.Itoa(i))
			}
		default:
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DropTopic deletes a topic's stream (md), every partition first unloaded
// wherever it is served (unload: the front door's hand-over of a unit, to
// no one) so its clients are told to reconnect and then find it gone; its
// compacted logs go with it.
func (b *Broker) DropTopic(ctx context.Context, md lakestream.StreamMetadata, unload func(ctx context.Context, unit string) error) error {
	for _, unit := range StreamUnits(md) {
		if err := unload(ctx, unit); err != nil {
			return err
		}
	}
	if err := b.DropCompactedLogs(ctx, md); err != nil {
		b.cfg.Logger.Warn("deleting a topic: dropping its compacted logs", "topic", md.ID.String(), "err", err)
	}
	return b.cfg.Catalog.DropStream(ctx, md.ID, true)
}
