package lakehouse

// The schema history of a topic, as the gateway's schema registry keeps it
// in its stream's properties (docs/table-schema.md, "Schema versions").

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/protocol/pb"
)

// schemaVersionPrefix is the stream property prefix of schema version v:
// "lakegate.schema.<v>" (gateway/schema.go writes them).
const schemaVersionPrefix = "lakegate.schema."

// SchemaHistory returns the Avro definitions of a topic's schema versions
// from its stream properties, keyed by the schema_version bytes messages
// carry (8-byte big-endian v): what TypedSchema.WithWriters takes. Versions
// of other types and properties that do not parse are left out.
func SchemaHistory(props map[string]string) map[string][]byte {
	var out map[string][]byte
	for k, val := range props {
		rest, ok := strings.CutPrefix(k, schemaVersionPrefix)
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(rest, 10, 63)
		if err != nil {
			continue // "count", or not a version
		}
		var st struct {
			Type pb.Schema_Type `json:"type"`
			Data []byte         `json:"data"`
		}
		if json.Unmarshal([]byte(val), &st) != nil || st.Type != pb.Schema_Avro || len(st.Data) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[string(binary.BigEndian.AppendUint64(nil, v))] = st.Data
	}
	return out
}
