package broker

import (
	"context"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
)

// LoadedTopic is a topic-partition this node has taken (its ownership)
// and loaded (its log, policies and partition state), ready to be served:
// the registry of the topics served (the gateway's, until it moves here)
// starts its partition actor (StartPartition) once it has registered the
// topic, or closes it (Close) when it lost a race to load it.
type LoadedTopic struct {
	Ref   PartRef
	Owner lakestream.Ownership
	Log   lakestream.Log
	// Dedup: the deduplication policy as it applies now.
	Dedup bool
	// Limits: the per-topic limits as they apply now.
	Limits TopicLimits
	// State is the partition actor's loaded state.
	State *actors.LoadedPartition
	// Terminated: the topic was terminated; End is its end offset.
	Terminated bool
	End        int64
}

// GuardOpts are the cursor options of writes only the owner may make.
func GuardOpts(owner lakestream.Ownership) []lakestream.CursorOption {
	return []lakestream.CursorOption{lakestream.WithGuard(owner)}
}

// LoadTopic takes the ownership of ref's unit (Own: ErrServiceNotReady
// when another member owns it) and loads what serving it needs. One load
// of the stream gives both the log and the metadata.
func (b *Broker) LoadTopic(ctx context.Context, ref PartRef) (*LoadedTopic, error) {
	owner, err := b.Own(ctx, ref.Unit())
	if err != nil {
		return nil, err
	}
	st, err := b.cfg.Catalog.Stream(ctx, ref.Stream)
	if err != nil {
		return nil, err
	}
	l := &LoadedTopic{Ref: ref, Owner: owner}
	if l.Log, err = st.Log(ctx, ref.Index); err != nil {
		return nil, err
	}
	if l.Dedup, err = b.DedupEnabled(ctx, st.Metadata()); err != nil {
		return nil, err
	}
	if l.Limits, err = b.LimitsOf(ctx, st.Metadata()); err != nil {
		return nil, err
	}
	if l.State, err = actors.LoadPartition(ctx, l.Log, l.Dedup, GuardOpts(owner)...); err != nil {
		return nil, err
	}
	if l.State.State.Terminated {
		l.Terminated = true
		if l.End, err = l.Log.NextOffset(ctx); err != nil {
			l.State.Close(ctx)
			return nil, err
		}
	}
	return l, nil
}

// Close gives up a loaded topic that will not be served (the caller lost
// a race to load it): its partition state's cursors are closed.
func (l *LoadedTopic) Close(ctx context.Context) { l.State.Close(ctx) }

// StartPartition starts the topic's partition actor on rt; onLost is
// called when a guarded append finds the ownership lost.
func (b *Broker) StartPartition(rt actors.Runtime, l *LoadedTopic, onLost func(error)) *actors.PartitionActor {
	return actors.StartPartition(rt, actors.PartitionOptions{
		Name:   l.Ref.Unit(),
		Log:    l.Log,
		Guard:  l.Owner,
		State:  l.State,
		Config: actors.PartitionConfig{Dedup: l.Dedup},
		OnLost: onLost,
		Logger: b.cfg.Logger,
	})
}

// WatchOwnership calls unload when the topic's ownership is lost while it
// is served (not a release by its unload: closing reports that), until
// unloaded is closed.
func (b *Broker) WatchOwnership(l *LoadedTopic, unloaded <-chan struct{}, closing func() bool, unload func()) {
	go func() {
		select {
		case <-l.Owner.Lost():
			if !closing() { // not a release by the unload itself
				b.cfg.Logger.Warn("lost the ownership of a topic: unloading it", "topic", l.Ref.Unit())
				unload()
			}
		case <-unloaded:
		}
	}()
}

// ReleaseTopic releases the ownership of a topic unloaded gracefully (it
// expires with the session when the release fails).
func (b *Broker) ReleaseTopic(owner lakestream.Ownership, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := owner.Release(ctx); err != nil {
		b.cfg.Logger.Warn("unloading a topic: releasing its ownership failed (it expires with the session)", "topic", name, "err", err)
	}
}
