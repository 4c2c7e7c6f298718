package icebergrest

// What a client may ask the catalog to do with storage
// (docs/iceberg-catalog.md, "Locations and storage properties"). The
// catalog is a read/commit path for lakegate's own store, not a
// file-writing service:
//
//   - Every location a client chooses — a table's location (create,
//     stage-create, register, set-location), a namespace's location
//     property, the write.*.path table properties, a metadata file to
//     register — must be inside the warehouse directory of the table's
//     tenant, <Warehouse>/<first namespace level>/, as plain path segments
//     (no "." or "..", no '%', '\', '?', '#', ':' or control characters).
//     A table created without a location goes to
//     <Warehouse>/<namespace levels>/<name>.
//   - Storage properties a client sends (endpoints, credentials, the
//     FileIO implementation: isStorageProp) are dropped from table and
//     namespace properties: the catalog never opens storage with them.
//   - Identifiers in the streams' space (Options.Reserved) cannot be
//     created, registered, renamed onto or committed to by clients.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// locationProps are the table properties that tell writers where to put
// files; each must be inside the table's tenant directory.
var locationProps = []string{
	table.WriteDataPathKey, table.WriteMetadataPathKey, table.WriteMetadataLocationKey,
	"write.object-storage.path", "write.folder-storage.path",
}

// storagePrefixes and storageKeys name the properties that configure
// storage access in iceberg-go, pyiceberg or Java: endpoints, regions,
// credentials, signers, proxies, key files, the FileIO class.
var (
	storagePrefixes = []string{"s3.", "s3a.", "gcs.", "gs.", "adls.", "azure.", "abfs.", "wasb.", "oss.",
		"client.", "aws.", "hadoop.", "fs.", "io.", "rest.", "header.", "http-client.", "hive.", "glue.", "dynamodb."}
	storageKeys = []string{"io-impl", "py-io-impl", "warehouse", "uri", "token", "credential", "scope",
		"oauth2-server-uri", "audience", "resource", "signer", "signer.uri", "signer.endpoint"}
)

// isStorageProp reports whether a property key configures storage access
// (and is therefore dropped from what clients send).
func isStorageProp(k string) bool {
	k = strings.ToLower(k)
	if slices.Contains(storageKeys, k) {
		return true
	}
	for _, p := range storagePrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// withoutStorageProps returns props without the storage properties, and
// the keys it dropped (sorted).
func withoutStorageProps(props map[string]string) (map[string]string, []string) {
	var dropped []string
	out := make(map[string]string, len(props))
	for k, v := range props {
		if isStorageProp(k) {
			dropped = append(dropped, k)
			continue
		}
		out[k] = v
	}
	slices.Sort(dropped)
	return out, dropped
}

// validSegment reports why s cannot be one segment of a location inside
// the warehouse ("" when it can).
func validSegment(s string) string {
	switch {
	case s == "":
		return "an empty path segment"
	case s == "." || s == "..":
		return "a \".\" or \"..\" path segment"
	case strings.HasPrefix(s, ".lakegate"):
		return "a path segment starting with .lakegate"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`/\%?#:<>"|*`, r) {
			return fmt.Sprintf("the character %q", r)
		}
	}
	return ""
}

// tenantDir is the directory the tables of namespace ns live in:
// <Warehouse>/<ns[0]>.
func (s *server) tenantDir(ns table.Identifier) (string, error) {
	if s.warehouse == "" {
		return "", fmt.Errorf("%w: this catalog has no warehouse: clients cannot choose or create storage locations", ErrForbidden)
	}
	if len(ns) == 0 {
		return "", fmt.Errorf("%w: empty namespace", errBadRequest)
	}
	if why := validSegment(ns[0]); why != "" {
		return "", fmt.Errorf("%w: namespace level %q cannot name a directory of the warehouse: it has %s", errBadRequest, ns[0], why)
	}
	return s.warehouse + "/" + ns[0], nil
}

// checkLocation refuses loc (what: its role, for the message) unless it
// is inside the tenant directory of namespace ns: strictly below it, or
// that directory itself when orEqual (a namespace's location).
func (s *server) checkLocation(ns table.Identifier, what, loc string, orEqual bool) error {
	dir, err := s.tenantDir(ns)
	if err != nil {
		return err
	}
	refuse := func(why string) error {
		return fmt.Errorf("%w: %s %q is outside the warehouse: tables of namespace %s live under %s/ (%s)",
			ErrForbidden, what, loc, strings.Join(ns, "."), dir, why)
	}
	loc = strings.TrimSuffix(loc, "/")
	if loc == dir {
		if orEqual {
			return nil
		}
		return refuse("a table needs a directory of its own below it")
	}
	rest, ok := strings.CutPrefix(loc, dir+"/")
	if !ok {
		return refuse("not below it")
	}
	for _, seg := range strings.Split(rest, "/") {
		if why := validSegment(seg); why != "" {
			return refuse("it has " + why)
		}
	}
	return nil
}

// checkLocationProps checks the location properties among props.
func (s *server) checkLocationProps(ns table.Identifier, props map[string]string) error {
	for _, k := range locationProps {
		if v, ok := props[k]; ok {
			if err := s.checkLocation(ns, "property "+k, v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultLocation is where a table created without a location goes:
// <Warehouse>/<namespace levels>/<name>.
func (s *server) defaultLocation(id table.Identifier) (string, error) {
	dir, err := s.tenantDir(id[:1])
	if err != nil {
		return "", err
	}
	for _, l := range id[1:] {
		if why := validSegment(l); why != "" {
			return "", fmt.Errorf("%w: %q cannot name a directory (it has %s): give the table a location inside %s/", errBadRequest, l, why, dir)
		}
	}
	return dir + "/" + strings.Join(id[1:], "/"), nil
}

// checkMetadata refuses table metadata whose location or location
// properties are outside the tenant directory of ns.
func (s *server) checkMetadata(ns table.Identifier, md table.Metadata) error {
	if err := s.checkLocation(ns, "table location", md.Location(), false); err != nil {
		return err
	}
	return s.checkLocationProps(ns, md.Properties())
}

// updateFields are the fields of a table update the policy reads.
type updateFields struct {
	Action   string            `json:"action"`
	Location string            `json:"location"`
	Updates  map[string]string `json:"updates"`
}

// sanitizeUpdates checks a commit's updates against the policy: every
// set-location inside the tenant directory of ns, set-properties without
// storage properties (dropped: the update is rebuilt) and with location
// properties inside it. It returns the updates to commit and the storage
// property keys dropped.
func (s *server) sanitizeUpdates(ns table.Identifier, updates table.Updates) (table.Updates, []string, error) {
	out := make(table.Updates, 0, len(updates))
	var dropped []string
	for _, u := range updates {
		switch u.Action() {
		case table.UpdateSetLocation, table.UpdateSetProperties:
		default:
			out = append(out, u)
			continue
		}
		b, err := json.Marshal(u)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: update %s: %v", errBadRequest, u.Action(), err)
		}
		var f updateFields
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, nil, fmt.Errorf("%w: update %s: %v", errBadRequest, u.Action(), err)
		}
		if u.Action() == table.UpdateSetLocation {
			if err := s.checkLocation(ns, "table location", f.Location, false); err != nil {
				return nil, nil, err
			}
			out = append(out, u)
			continue
		}
		props, d := withoutStorageProps(f.Updates)
		if err := s.checkLocationProps(ns, props); err != nil {
			return nil, nil, err
		}
		dropped = append(dropped, d...)
		if len(d) == 0 {
			out = append(out, u)
		} else {
			out = append(out, table.NewSetPropertiesUpdate(ice.Properties(props)))
		}
	}
	return out, dropped, nil
}

// reserved refuses identifiers in the streams' space.
func (s *server) reserved(id table.Identifier, what string) error {
	if s.o.Reserved != nil && s.o.Reserved(id) {
		return fmt.Errorf("%w: %s is reserved for a stream's table (lakegate creates and writes it when the topic %s has data; a client cannot %s it)",
			ErrForbidden, strings.Join(id, "."), strings.Join(id, "/"), what)
	}
	return nil
}

// isMetadataFile reports whether loc names a table metadata file.
func isMetadataFile(loc string) bool {
	return strings.HasSuffix(loc, ".metadata.json")
}
