package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Timeout is the default bound of one command's requests (New).
const Timeout = 60 * time.Second

// responseBytesMax bounds a response body read by the client.
const responseBytesMax = 64 << 20

// Options are the per-command options of the admin CLI's flags.
type Options struct {
	JSON       bool   // print the server's JSON instead of a table
	Force      bool   // topics delete: also with active producers/consumers
	Partitions int    // topics create: partitions (0: not partitioned)
	Time, ID   string // subscriptions reset: the position (one of the two)
}

// New returns a client of the admin REST at base ("http://host:port"),
// whose requests time out after Timeout.
func New(base string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), http: &http.Client{Timeout: Timeout}}
}

// topic is a parsed topic name.
type topic struct{ tenant, ns, name string }

func parseTopic(s string) (topic, error) {
	rest := strings.TrimPrefix(s, "persistent://")
	if strings.HasPrefix(rest, "non-persistent://") {
		return topic{}, fmt.Errorf("topic %q: non-persistent topics are not supported", s)
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return topic{"public", "default", parts[0]}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return topic{parts[0], parts[1], parts[2]}, nil
	}
	return topic{}, fmt.Errorf("topic %q: want persistent://tenant/namespace/name, tenant/namespace/name or name", s)
}

func (t topic) String() string { return "persistent://" + t.tenant + "/" + t.ns + "/" + t.name }

// path is the topic's REST path, with suffix appended.
func (t topic) path(suffix string) string {
	return "/admin/v2/persistent/" + url.PathEscape(t.tenant) + "/" + url.PathEscape(t.ns) + "/" + url.PathEscape(t.name) + suffix
}

// Client calls a node's admin REST (package admin) and prints the
// answers as the lakegate admin CLI shows them: aligned tables, or the
// server's JSON with Options.JSON. Safe for concurrent use.
type Client struct {
	base  string
	http  *http.Client
	token string // sent as a bearer token when not ""
}

// WithToken returns a client of the same node that authenticates with
// token (Authorization: Bearer).
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// at returns a client of another node's admin REST (base), with c's
// token and timeout.
func (c *Client) at(base string) *Client {
	cc := *c
	cc.base = strings.TrimSuffix(base, "/")
	return &cc
}

// HTTPError is a non-2xx answer; Reason is the server's "reason".
type HTTPError struct {
	Method, Path string
	Status       int
	Reason       string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Reason)
}

// do sends a request (body JSON-encoded unless nil) and returns the body
// of a 2xx answer; other answers are an *HTTPError.
func (c *Client) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin REST at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, responseBytesMax))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &HTTPError{Method: method, Path: path, Status: resp.StatusCode}
		var r struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(b, &r) == nil && r.Reason != "" {
			e.Reason = r.Reason
		} else {
			e.Reason = strings.TrimSpace(string(b))
			if e.Reason == "" {
				e.Reason = "(no reason given)"
			}
		}
		return nil, e
	}
	return b, nil
}

// get GETs path and decodes its JSON into v (raw returned for --json).
func (c *Client) get(ctx context.Context, path string, v any) ([]byte, error) {
	b, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return b, fmt.Errorf("GET %s: unexpected answer: %w", path, err)
		}
	}
	return b, nil
}

// printJSON re-indents a server answer.
func printJSON(out io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = out.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := out.Write(buf.Bytes())
	return err
}

// table writes aligned rows; the first is the header.
func table(out io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// partitions is the topic's partition count (0: not partitioned).
func (c *Client) partitions(ctx context.Context, t topic) (int, error) {
	var md struct {
		Partitions int `json:"partitions"`
	}
	_, err := c.get(ctx, t.path("/partitions"), &md)
	return md.Partitions, err
}

// TopicsList prints the topics of namespace ns ("tenant/namespace"):
// partitioned topics once, with their partition count.
func (c *Client) TopicsList(ctx context.Context, o Options, ns string, out io.Writer) error {
	parts := strings.Split(ns, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("namespace %q: want tenant/namespace", ns)
	}
	base := "/admin/v2/persistent/" + url.PathEscape(parts[0]) + "/" + url.PathEscape(parts[1])
	var all, partitioned []string
	rawAll, err := c.get(ctx, base, &all)
	if err != nil {
		return err
	}
	rawPart, err := c.get(ctx, base+"/partitioned", &partitioned)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, fmt.Appendf(nil, `{"topics":%s,"partitioned":%s}`, bytes.TrimSpace(rawAll), bytes.TrimSpace(rawPart)))
	}
	type row struct {
		name  string
		parts int
	}
	var rows []row
	isPart := map[string]bool{}
	for _, p := range partitioned {
		t, err := parseTopic(p)
		if err != nil {
			return err
		}
		n, err := c.partitions(ctx, t)
		if err != nil {
			return err
		}
		rows = append(rows, row{p, n})
		isPart[p] = true
	}
	for _, name := range all {
		if i := strings.LastIndex(name, "-partition-"); i > 0 && isPart[name[:i]] {
			continue // a partition of a partitioned topic listed above
		}
		if !isPart[name] {
			rows = append(rows, row{name, 0})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	tab := [][]string{{"TOPIC", "PARTITIONS"}}
	for _, r := range rows {
		p := "-"
		if r.parts > 0 {
			p = strconv.Itoa(r.parts)
		}
		tab = append(tab, []string{r.name, p})
	}
	return table(out, tab)
}

// TopicsCreate creates topic name, partitioned when o.Partitions > 0.
func (c *Client) TopicsCreate(ctx context.Context, o Options, name string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	if o.Partitions > 0 {
		_, err = c.do(ctx, http.MethodPut, t.path("/partitions"), o.Partitions)
	} else {
		_, err = c.do(ctx, http.MethodPut, t.path(""), nil)
	}
	if err != nil {
		return err
	}
	if o.Partitions > 0 {
		fmt.Fprintf(out, "created %s with %d partitions\n", t, o.Partitions)
	} else {
		fmt.Fprintf(out, "created %s\n", t)
	}
	return nil
}

// TopicsDelete deletes topic name (every partition of a partitioned one);
// o.Force also with producers or consumers attached.
func (c *Client) TopicsDelete(ctx context.Context, o Options, name string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	n, err := c.partitions(ctx, t)
	if err != nil {
		return err
	}
	path := t.path("")
	if n > 0 {
		path = t.path("/partitions")
	}
	if o.Force {
		path += "?force=true"
	}
	if _, err := c.do(ctx, http.MethodDelete, path, nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %s\n", t)
	return nil
}

// adminSubStats and topicStats are the parts of Pulsar's TopicStats
// the CLI shows.
type adminSubStats struct {
	MsgBacklog      int64  `json:"msgBacklog"`
	BacklogSize     int64  `json:"backlogSize"`
	UnackedMessages int64  `json:"unackedMessages"`
	Type            string `json:"type"`
	IsDurable       bool   `json:"isDurable"`
	Consumers       []any  `json:"consumers"`
}

type topicStats struct {
	MsgInCounter         int64                    `json:"msgInCounter"`
	BytesInCounter       int64                    `json:"bytesInCounter"`
	MsgOutCounter        int64                    `json:"msgOutCounter"`
	StorageSize          int64                    `json:"storageSize"`
	BacklogSize          int64                    `json:"backlogSize"`
	AverageMsgSize       float64                  `json:"averageMsgSize"`
	LastPublishTimestamp int64                    `json:"lastPublishTimestamp"`
	Publishers           []any                    `json:"publishers"`
	Subscriptions        map[string]adminSubStats `json:"subscriptions"`
	Metadata             *struct {
		Partitions int `json:"partitions"`
	} `json:"metadata"`
}

// stats GETs stats (partitioned-stats for a partitioned topic).
func (c *Client) stats(ctx context.Context, t topic) (topicStats, []byte, error) {
	var st topicStats
	n, err := c.partitions(ctx, t)
	if err != nil {
		return st, nil, err
	}
	path := t.path("/stats")
	if n > 0 {
		path = t.path("/partitioned-stats?perPartition=false")
	}
	raw, err := c.get(ctx, path, &st)
	return st, raw, err
}

// TopicsStats prints a topic's stats (partitioned-stats for a
// partitioned topic) and its subscriptions.
func (c *Client) TopicsStats(ctx context.Context, o Options, name string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	st, raw, err := c.stats(ctx, t)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	parts := "-"
	if st.Metadata != nil && st.Metadata.Partitions > 0 {
		parts = strconv.Itoa(st.Metadata.Partitions)
	}
	last := "-"
	if st.LastPublishTimestamp > 0 {
		last = time.UnixMilli(st.LastPublishTimestamp).UTC().Format(time.RFC3339Nano)
	}
	rows := [][]string{
		{"TOPIC", t.String()},
		{"PARTITIONS", parts},
		{"MESSAGES IN", strconv.FormatInt(st.MsgInCounter, 10)},
		{"BYTES IN", strconv.FormatInt(st.BytesInCounter, 10)},
		{"STORAGE BYTES", strconv.FormatInt(st.StorageSize, 10)},
		{"AVG MESSAGE BYTES", strconv.FormatFloat(st.AverageMsgSize, 'f', 1, 64)},
		{"LAST PUBLISH", last},
		{"PRODUCERS", strconv.Itoa(len(st.Publishers))},
		{"SUBSCRIPTIONS", strconv.Itoa(len(st.Subscriptions))},
	}
	if err := table(out, rows); err != nil {
		return err
	}
	if len(st.Subscriptions) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	return subscriptionTable(out, st.Subscriptions)
}

func subscriptionTable(out io.Writer, subs map[string]adminSubStats) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := [][]string{{"SUBSCRIPTION", "TYPE", "DURABLE", "CONSUMERS", "BACKLOG", "BACKLOG BYTES", "UNACKED"}}
	for _, n := range names {
		s := subs[n]
		typ := s.Type
		if typ == "" {
			typ = "-"
		}
		rows = append(rows, []string{n, typ, strconv.FormatBool(s.IsDurable), strconv.Itoa(len(s.Consumers)),
			strconv.FormatInt(s.MsgBacklog, 10), strconv.FormatInt(s.BacklogSize, 10), strconv.FormatInt(s.UnackedMessages, 10)})
	}
	return table(out, rows)
}

// SubscriptionsList prints a topic's subscriptions.
func (c *Client) SubscriptionsList(ctx context.Context, o Options, name string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	var names []string
	raw, err := c.get(ctx, t.path("/subscriptions"), &names)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	st, _, err := c.stats(ctx, t)
	if err != nil {
		return err
	}
	subs := map[string]adminSubStats{}
	for _, n := range names {
		subs[n] = st.Subscriptions[n] // zero when it vanished meanwhile
	}
	return subscriptionTable(out, subs)
}

// parseResetTime reads --time: RFC 3339, Unix milliseconds, or a
// duration before now.
func parseResetTime(s string, now time.Time) (int64, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d).UnixMilli(), nil
	}
	return 0, fmt.Errorf("--time %q: want an RFC 3339 time, Unix milliseconds or a duration ago (10m)", s)
}

// parseResetID reads --id: ledger:entry[:partition], earliest or latest.
func parseResetID(s string) (map[string]int64, error) {
	switch s {
	case "earliest":
		return map[string]int64{"ledgerId": -1, "entryId": -1, "partitionIndex": -1}, nil
	case "latest":
		return map[string]int64{"ledgerId": 1<<63 - 1, "entryId": 1<<63 - 1, "partitionIndex": -1}, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("--id %q: want ledger:entry[:partition], earliest or latest", s)
	}
	var v [3]int64
	v[2] = -1
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--id %q: %q is not a number", s, p)
		}
		v[i] = n
	}
	return map[string]int64{"ledgerId": v[0], "entryId": v[1], "partitionIndex": v[2]}, nil
}

// SubscriptionsReset moves subscription sub of a topic to o.Time (RFC
// 3339, Unix ms or a duration ago) or o.ID (ledger:entry[:partition],
// earliest, latest): exactly one of the two.
func (c *Client) SubscriptionsReset(ctx context.Context, o Options, name, sub string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	if (o.Time == "") == (o.ID == "") {
		return errors.New("subscriptions reset: give exactly one of --time and --id")
	}
	base := t.path("/subscription/" + url.PathEscape(sub) + "/resetcursor")
	if o.Time != "" {
		ms, err := parseResetTime(o.Time, time.Now())
		if err != nil {
			return err
		}
		if _, err := c.do(ctx, http.MethodPost, base+"/"+strconv.FormatInt(ms, 10), nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "reset %s on %s to %s\n", sub, t, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		return nil
	}
	id, err := parseResetID(o.ID)
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, base, id); err != nil {
		return err
	}
	fmt.Fprintf(out, "reset %s on %s to %s\n", sub, t, o.ID)
	return nil
}

// adminTableInfo is GET …/{topic}/table (admin/tables.go).
type adminTableInfo struct {
	Topic    string `json:"topic"`
	Location string `json:"location"`
	Formats  []struct {
		Format        string `json:"format"`
		URI           string `json:"uri"`
		Identifier    string `json:"identifier"`
		Version       int64  `json:"version"`
		FormatVersion string `json:"formatVersion"`
		Rows          int64  `json:"rows"`
		Files         int    `json:"files"`
		LastCommitMs  int64  `json:"lastCommitTimestamp"`
	} `json:"formats"`
	Partitions []struct {
		Partition    int     `json:"partition"`
		Log          int64   `json:"log"`
		CompactedEnd int64   `json:"compactedEndOffset"`
		LogEnd       int64   `json:"logEndOffset"`
		Lag          int64   `json:"lag"`
		LagSeconds   float64 `json:"lagSeconds"`
	} `json:"partitions"`
	Retention struct {
		RetentionMs    int64 `json:"retentionMs"`
		RetentionBytes int64 `json:"retentionBytes"`
		LastRun        *struct {
			TimestampMs  int64 `json:"timestamp"`
			FilesRemoved int   `json:"filesRemoved"`
			BytesRemoved int64 `json:"bytesRemoved"`
			FilesHeld    int   `json:"filesHeld"`
			LiveBytes    int64 `json:"liveBytes"`
		} `json:"lastRun"`
	} `json:"retention"`
}

// Tables prints a topic's table: location, each format's state and each
// partition's compacted end and lag (records, and the age of the oldest
// record not in the table).
func (c *Client) Tables(ctx context.Context, o Options, name string, out io.Writer) error {
	t, err := parseTopic(name)
	if err != nil {
		return err
	}
	var info adminTableInfo
	raw, err := c.get(ctx, t.path("/table"), &info)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	if err := table(out, [][]string{{"TOPIC", info.Topic}, {"LOCATION", info.Location}}); err != nil {
		return err
	}
	fmt.Fprintln(out)
	rows := [][]string{{"FORMAT", "VERSION", "ROWS", "FILES", "LAST COMMIT", "URI"}}
	for _, f := range info.Formats {
		last := "-"
		if f.LastCommitMs > 0 {
			last = time.UnixMilli(f.LastCommitMs).UTC().Format(time.RFC3339)
		}
		uri := f.URI
		if f.Identifier != "" {
			uri += " (" + f.Identifier + ")"
		}
		rows = append(rows, []string{f.Format, strconv.FormatInt(f.Version, 10), strconv.FormatInt(f.Rows, 10),
			strconv.Itoa(f.Files), last, uri})
	}
	if len(info.Formats) == 0 {
		rows = append(rows, []string{"(none)", "-", "-", "-", "-", "-"})
	}
	if err := table(out, rows); err != nil {
		return err
	}
	fmt.Fprintln(out)
	rows = [][]string{{"PARTITION", "LOG", "COMPACTED END", "LOG END", "LAG", "LAG AGE"}}
	for _, p := range info.Partitions {
		part := strconv.Itoa(p.Partition)
		if p.Partition < 0 {
			part = "-"
		}
		rows = append(rows, []string{part, strconv.FormatInt(p.Log, 10), strconv.FormatInt(p.CompactedEnd, 10),
			strconv.FormatInt(p.LogEnd, 10), strconv.FormatInt(p.Lag, 10),
			(time.Duration(p.LagSeconds * float64(time.Second))).Round(time.Millisecond).String()})
	}
	if err := table(out, rows); err != nil {
		return err
	}
	fmt.Fprintln(out)
	limit := func(v int64, unit string) string {
		if v <= 0 {
			return "none"
		}
		return strconv.FormatInt(v, 10) + unit
	}
	ret := info.Retention
	run := "never"
	if lr := ret.LastRun; lr != nil {
		run = fmt.Sprintf("%s: %d files (%d bytes) removed, %d held, %d bytes live",
			time.UnixMilli(lr.TimestampMs).UTC().Format(time.RFC3339), lr.FilesRemoved, lr.BytesRemoved, lr.FilesHeld, lr.LiveBytes)
	}
	return table(out, [][]string{{"RETENTION", "time " + limit(ret.RetentionMs, " ms") + ", size " + limit(ret.RetentionBytes, " bytes")},
		{"LAST RUN", run}})
}
