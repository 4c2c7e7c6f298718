package engine

import (
	"container/list"
	"sync"
)

// chunkCache is a byte-bounded LRU of decoded chunks keyed by their location.
// The WAL writer inserts chunks it has just written so tail readers on this
// node never GET them; readers insert what they fetched. Safe for concurrent
// use. Cached values are immutable and shared: readers copy payloads out.
type chunkCache struct {
	maxBytes int64

	mu struct {
		sync.Mutex
		bytes int64
		lru   *list.List // front = most recent; values *cacheItem
		items map[chunkLoc]*list.Element
	}
}

// chunkLoc identifies a chunk: an object and the chunk's byte offset in it.
type chunkLoc struct {
	object string
	offset int64
}

type cacheItem struct {
	loc   chunkLoc
	chunk *loadedChunk
}

func newChunkCache(maxBytes int64) *chunkCache {
	c := &chunkCache{maxBytes: maxBytes}
	c.mu.lru = list.New()
	c.mu.items = map[chunkLoc]*list.Element{}
	return c
}

func (c *chunkCache) get(loc chunkLoc) *loadedChunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.items[loc]
	if !ok {
		return nil
	}
	c.mu.lru.MoveToFront(el)
	return el.Value.(*cacheItem).chunk
}

// put inserts a chunk, evicting the least recently used ones beyond the
// bound. A chunk larger than the whole cache is not kept.
func (c *chunkCache) put(loc chunkLoc, ch *loadedChunk) {
	if ch.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.items[loc]; ok {
		c.mu.lru.MoveToFront(el)
		return
	}
	c.mu.items[loc] = c.mu.lru.PushFront(&cacheItem{loc: loc, chunk: ch})
	c.mu.bytes += ch.size
	for c.mu.bytes > c.maxBytes {
		el := c.mu.lru.Back()
		it := el.Value.(*cacheItem)
		c.mu.lru.Remove(el)
		delete(c.mu.items, it.loc)
		c.mu.bytes -= it.chunk.size
	}
}

func (c *chunkCache) usedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.bytes
}
