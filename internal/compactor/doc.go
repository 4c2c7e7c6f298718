// Package compactor connects the compaction worker (actors) to the storage
// engine: it runs each actors.CompactionJob as engine.CompactToTable on the
// stream's table target. It is the one place that knows both sides, so
// actors keeps seeing only lakestream and engine never imports actors.
package compactor
