package catalog

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lakegate/lakegate/lakestream"
)

// nameBytesMax bounds every namespace, stream and table catalog name.
const nameBytesMax = 255

// keys builds the metadata keys of docs/catalog.md under one root.
type keys struct {
	base string // "<root>catalog/"
}

func newKeys(root string) keys {
	if !strings.HasSuffix(root, "/") {
		root += "/"
	}
	return keys{base: root + "catalog/"}
}

func (k keys) namespace(ns string) string { return k.base + "ns/" + escapeSegment(ns) }
func (k keys) namespacePrefix() string    { return k.base + "ns/" }

func (k keys) stream(id lakestream.StreamIdentifier) string {
	return k.streamPrefix(id.Namespace) + escapeSegment(id.Name)
}

// streamPrefix ends with the separator, so listing one namespace never
// matches another whose encoded name merely starts the same way.
func (k keys) streamPrefix(ns string) string {
	return k.base + "streams/" + escapeSegment(ns) + "/"
}

func (k keys) tombstone(id lakestream.StreamIdentifier) string {
	return k.base + "tombstones/" + escapeSegment(id.Namespace) + "/" + escapeSegment(id.Name)
}

func (k keys) tableCatalog(name string) string { return k.tableCatalogPrefix() + escapeSegment(name) }
func (k keys) tableCatalogPrefix() string      { return k.base + "tablecatalogs/" }
func (k keys) defaultMaterialization() string  { return k.base + "default-materialization" }
func (k keys) nextLogID() string               { return k.base + "next-log-id" }

// prefixEnd is the exclusive end of the range of keys beginning with p.
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "" // all 0xff: to the end of the keyspace
}

const hexUpper = "0123456789ABCDEF"

func segmentByteOK(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// escapeSegment encodes s as one key segment: bytes outside [A-Za-z0-9._-]
// become %XX. It is injective and never yields '/'.
func escapeSegment(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !segmentByteOK(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if segmentByteOK(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexUpper[c>>4])
		b.WriteByte(hexUpper[c&0xf])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// unescapeSegment reverses escapeSegment.
func unescapeSegment(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("catalog: bad key segment %q", s)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("catalog: bad key segment %q", s)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func checkNameChars(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s name", lakestream.ErrInvalidArgument, kind)
	}
	if len(s) > nameBytesMax {
		return fmt.Errorf("%w: %s name longer than %d bytes", lakestream.ErrInvalidArgument, kind, nameBytesMax)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s name %q is not UTF-8", lakestream.ErrInvalidArgument, kind, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s name %q has a control character", lakestream.ErrInvalidArgument, kind, s)
		}
	}
	return nil
}

// validateNamespace accepts "ns" and "tenant/ns".
func validateNamespace(ns string) error {
	if err := checkNameChars("namespace", ns); err != nil {
		return err
	}
	parts := strings.Split(ns, "/")
	if len(parts) > 2 {
		return fmt.Errorf("%w: namespace %q has more than one '/'", lakestream.ErrInvalidArgument, ns)
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("%w: namespace %q has an empty segment", lakestream.ErrInvalidArgument, ns)
		}
	}
	return nil
}

func validateStreamID(id lakestream.StreamIdentifier) error {
	if err := validateNamespace(id.Namespace); err != nil {
		return err
	}
	if err := checkNameChars("stream", id.Name); err != nil {
		return err
	}
	if strings.Contains(id.Name, "/") {
		return fmt.Errorf("%w: stream name %q contains '/'", lakestream.ErrInvalidArgument, id.Name)
	}
	return nil
}

func validateTableCatalogName(name string) error {
	return checkNameChars("table catalog", name)
}
