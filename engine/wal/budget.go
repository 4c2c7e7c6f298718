package wal

// Budget accounts for an object the way a Builder does, without holding its
// entries: a writer that gathers entries before it builds (the engine's
// batch loop) asks Fits before it takes each one, and so cuts the object
// before any limit of limits.go is reached. Budget and Builder share one
// statement of the limits, so an object whose entries all fit a Budget
// builds without ErrFull.
//
// The zero Budget is an empty object. A Budget is not safe for concurrent
// use.
type Budget struct {
	size   int64 // encoded object size so far, header included
	chunks map[int64]*budgetChunk
}

type budgetChunk struct {
	entries int
	records int64
}

// Fits reports whether a valid entry e for log fits (see Builder.Fits).
func (b *Budget) Fits(log int64, e Entry) bool {
	c, ok := b.chunks[log]
	if !ok {
		c = &budgetChunk{}
	}
	return fits(b.objectSize(), len(b.chunks), !ok, c.entries, c.records, e)
}

// Add accounts for e; like Builder.Add it returns ValidateEntry's error or
// ErrFull, and then accounts for nothing.
func (b *Budget) Add(log int64, e Entry) error {
	if err := ValidateEntry(e); err != nil {
		return err
	}
	if !b.Fits(log, e) {
		return ErrFull
	}
	if b.chunks == nil {
		b.chunks = map[int64]*budgetChunk{}
	}
	c, ok := b.chunks[log]
	if !ok {
		c = &budgetChunk{}
		b.chunks[log] = c
		b.size += dirRecordLen + chunkOverhead
	}
	c.entries++
	c.records += int64(e.Records)
	b.size += entryRecordLen + int64(len(e.Payload))
	return nil
}

// Len is the size in bytes the object would have when built now.
func (b *Budget) Len() int64 { return b.objectSize() }

// Logs is the number of logs (chunks) accounted for.
func (b *Budget) Logs() int { return len(b.chunks) }

func (b *Budget) objectSize() int64 { return objectHeaderLen + dirCRCLen + b.size }
