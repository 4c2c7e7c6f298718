package lakestream

import (
	"context"
	"fmt"
	"net/url"
	"sync"
)

// Opener opens a catalog for a URI of its scheme.
type Opener func(ctx context.Context, uri *url.URL, props map[string]string) (StreamCatalog, error)

var registry struct {
	sync.Mutex
	openers map[string]Opener
}

// Register makes an implementation available to Open under scheme. It panics
// if the scheme is registered twice (a programming error at init time).
func Register(scheme string, o Opener) {
	registry.Lock()
	defer registry.Unlock()
	if registry.openers == nil {
		registry.openers = map[string]Opener{}
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("lakestream: scheme registered twice: " + scheme)
	}
	registry.openers[scheme] = o
}

// Open opens the catalog named by uri with the implementation registered for
// its scheme (import the implementation package for its side effect).
func Open(ctx context.Context, uri string, props map[string]string) (StreamCatalog, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: catalog uri: %v", ErrInvalidArgument, err)
	}
	registry.Lock()
	o := registry.openers[u.Scheme]
	registry.Unlock()
	if o == nil {
		return nil, fmt.Errorf("%w: no lakestream implementation registered for scheme %q", ErrInvalidArgument, u.Scheme)
	}
	return o(ctx, u, props)
}
