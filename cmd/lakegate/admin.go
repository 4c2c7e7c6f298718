package main

// lakegate admin: a client of the node's admin REST (gateway/admin*.go).
//
//	lakegate admin [--url URL] [--json] topics list <tenant/namespace>
//	lakegate admin topics create <topic> [--partitions N]
//	lakegate admin topics delete <topic> [--force]
//	lakegate admin topics stats <topic>
//	lakegate admin subscriptions list <topic>
//	lakegate admin subscriptions reset <topic> <sub> (--time T | --id ID)
//	lakegate admin tables <topic>
//
// A topic is "persistent://tenant/ns/name", "tenant/ns/name" or "name"
// (public/default). --url defaults to $LAKEGATE_ADMIN_URL, else
// http://127.0.0.1:8080. Output is aligned tables; --json prints the
// server's JSON instead. A server error prints its HTTP status and reason.

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

const (
	defaultAdminURL = "http://127.0.0.1:8080"
	// adminTimeout bounds one admin command's requests.
	adminTimeout = 60 * time.Second
	// adminResponseBytesMax bounds a response body read by the CLI.
	adminResponseBytesMax = 64 << 20
)

const adminUsage = `usage: lakegate admin [--url URL] [--json] <command>

commands:
  topics list <tenant/namespace>
  topics create <topic> [--partitions N]
  topics delete <topic> [--force]
  topics stats <topic>
  subscriptions list <topic>
  subscriptions reset <topic> <subscription> (--time T | --id ID)
      T: RFC 3339 time, Unix milliseconds, or a duration ago (10m)
      ID: ledger:entry[:partition], earliest or latest
  tables <topic>

A topic is persistent://tenant/ns/name, tenant/ns/name or name (public/default).
--url defaults to $LAKEGATE_ADMIN_URL, else ` + defaultAdminURL + `.
`

// adminOpts are the flags of an admin command (accepted anywhere on the
// command line, as --name value, --name=value or -name).
type adminOpts struct {
	url        string
	json       bool
	force      bool
	partitions int
	time, id   string
}

// parseAdminArgs splits flags from positional arguments.
func parseAdminArgs(args []string, environ []string) (adminOpts, []string, error) {
	o := adminOpts{url: defaultAdminURL}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LAKEGATE_ADMIN_URL="); ok && v != "" {
			o.url = v
		}
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "url":
			o.url, err = value()
		case "json":
			o.json = !hasVal || val == "true"
		case "force":
			o.force = !hasVal || val == "true"
		case "partitions":
			var s string
			if s, err = value(); err == nil {
				o.partitions, err = strconv.Atoi(s)
				if err != nil || o.partitions < 0 {
					err = fmt.Errorf("--partitions %q: want a number ≥ 0", s)
				}
			}
		case "time":
			o.time, err = value()
		case "id":
			o.id, err = value()
		case "h", "help":
			return o, nil, errAdminHelp
		default:
			err = fmt.Errorf("unknown flag %s", a)
		}
		if err != nil {
			return o, nil, err
		}
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return o, nil, fmt.Errorf("--url %q: want http://host:port", o.url)
	}
	o.url = strings.TrimSuffix(o.url, "/")
	return o, pos, nil
}

var errAdminHelp = errors.New("help")

// runAdmin runs one admin command, writing its output to out.
func runAdmin(args []string, environ []string, out io.Writer) error {
	o, pos, err := parseAdminArgs(args, environ)
	switch {
	case errors.Is(err, errAdminHelp):
		fmt.Fprint(out, adminUsage)
		return nil
	case err != nil:
		return err
	case len(pos) == 0:
		fmt.Fprint(out, adminUsage)
		return errors.New("no admin command given")
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c := &adminClient{base: o.url, http: &http.Client{Timeout: adminTimeout}}
	want := func(n int, usage string) error {
		if len(pos) != n {
			return fmt.Errorf("usage: lakegate admin %s", usage)
		}
		return nil
	}
	cmd := strings.Join(pos[:min(2, len(pos))], " ")
	switch {
	case cmd == "topics list":
		if err := want(3, "topics list <tenant/namespace>"); err != nil {
			return err
		}
		return c.topicsList(ctx, o, pos[2], out)
	case cmd == "topics create":
		if err := want(3, "topics create <topic> [--partitions N]"); err != nil {
			return err
		}
		return c.topicsCreate(ctx, o, pos[2], out)
	case cmd == "topics delete":
		if err := want(3, "topics delete <topic> [--force]"); err != nil {
			return err
		}
		return c.topicsDelete(ctx, o, pos[2], out)
	case cmd == "topics stats":
		if err := want(3, "topics stats <topic>"); err != nil {
			return err
		}
		return c.topicsStats(ctx, o, pos[2], out)
	case cmd == "subscriptions list":
		if err := want(3, "subscriptions list <topic>"); err != nil {
			return err
		}
		return c.subscriptionsList(ctx, o, pos[2], out)
	case cmd == "subscriptions reset":
		if err := want(4, "subscriptions reset <topic> <subscription> (--time T | --id ID)"); err != nil {
			return err
		}
		return c.subscriptionsReset(ctx, o, pos[2], pos[3], out)
	case pos[0] == "tables":
		if err := want(2, "tables <topic>"); err != nil {
			return err
		}
		return c.tables(ctx, o, pos[1], out)
	}
	return fmt.Errorf("unknown admin command %q (lakegate admin --help)", strings.Join(pos, " "))
}

// adminTopic is a parsed topic name.
type adminTopic struct{ tenant, ns, name string }

func parseAdminTopic(s string) (adminTopic, error) {
	rest := strings.TrimPrefix(s, "persistent://")
	if strings.HasPrefix(rest, "non-persistent://") {
		return adminTopic{}, fmt.Errorf("topic %q: non-persistent topics are not supported", s)
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return adminTopic{"public", "default", parts[0]}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return adminTopic{parts[0], parts[1], parts[2]}, nil
	}
	return adminTopic{}, fmt.Errorf("topic %q: want persistent://tenant/namespace/name, tenant/namespace/name or name", s)
}

func (t adminTopic) String() string { return "persistent://" + t.tenant + "/" + t.ns + "/" + t.name }

// path is the topic's REST path, with suffix appended.
func (t adminTopic) path(suffix string) string {
	return "/admin/v2/persistent/" + url.PathEscape(t.tenant) + "/" + url.PathEscape(t.ns) + "/" + url.PathEscape(t.name) + suffix
}

// adminClient calls the admin REST.
type adminClient struct {
	base string
	http *http.Client
}

// adminHTTPError is a non-2xx answer; Reason is the server's "reason".
type adminHTTPError struct {
	Method, Path string
	Status       int
	Reason       string
}

func (e *adminHTTPError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Reason)
}

// do sends a request (body JSON-encoded unless nil) and returns the body
// of a 2xx answer; other answers are an *adminHTTPError.
func (c *adminClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
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
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin REST at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, adminResponseBytesMax))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &adminHTTPError{Method: method, Path: path, Status: resp.StatusCode}
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
func (c *adminClient) get(ctx context.Context, path string, v any) ([]byte, error) {
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
func (c *adminClient) partitions(ctx context.Context, t adminTopic) (int, error) {
	var md struct {
		Partitions int `json:"partitions"`
	}
	_, err := c.get(ctx, t.path("/partitions"), &md)
	return md.Partitions, err
}

func (c *adminClient) topicsList(ctx context.Context, o adminOpts, ns string, out io.Writer) error {
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
	if o.json {
		return printJSON(out, fmt.Appendf(nil, `{"topics":%s,"partitioned":%s}`, bytes.TrimSpace(rawAll), bytes.TrimSpace(rawPart)))
	}
	type row struct {
		name  string
		parts int
	}
	var rows []row
	isPart := map[string]bool{}
	for _, p := range partitioned {
		t, err := parseAdminTopic(p)
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

func (c *adminClient) topicsCreate(ctx context.Context, o adminOpts, name string, out io.Writer) error {
	t, err := parseAdminTopic(name)
	if err != nil {
		return err
	}
	if o.partitions > 0 {
		_, err = c.do(ctx, http.MethodPut, t.path("/partitions"), o.partitions)
	} else {
		_, err = c.do(ctx, http.MethodPut, t.path(""), nil)
	}
	if err != nil {
		return err
	}
	if o.partitions > 0 {
		fmt.Fprintf(out, "created %s with %d partitions\n", t, o.partitions)
	} else {
		fmt.Fprintf(out, "created %s\n", t)
	}
	return nil
}

func (c *adminClient) topicsDelete(ctx context.Context, o adminOpts, name string, out io.Writer) error {
	t, err := parseAdminTopic(name)
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
	if o.force {
		path += "?force=true"
	}
	if _, err := c.do(ctx, http.MethodDelete, path, nil); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %s\n", t)
	return nil
}

// adminSubStats and adminTopicStats are the parts of Pulsar's TopicStats
// the CLI shows.
type adminSubStats struct {
	MsgBacklog      int64  `json:"msgBacklog"`
	BacklogSize     int64  `json:"backlogSize"`
	UnackedMessages int64  `json:"unackedMessages"`
	Type            string `json:"type"`
	IsDurable       bool   `json:"isDurable"`
	Consumers       []any  `json:"consumers"`
}

type adminTopicStats struct {
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
func (c *adminClient) stats(ctx context.Context, t adminTopic) (adminTopicStats, []byte, error) {
	var st adminTopicStats
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

func (c *adminClient) topicsStats(ctx context.Context, o adminOpts, name string, out io.Writer) error {
	t, err := parseAdminTopic(name)
	if err != nil {
		return err
	}
	st, raw, err := c.stats(ctx, t)
	if err != nil {
		return err
	}
	if o.json {
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

func (c *adminClient) subscriptionsList(ctx context.Context, o adminOpts, name string, out io.Writer) error {
	t, err := parseAdminTopic(name)
	if err != nil {
		return err
	}
	var names []string
	raw, err := c.get(ctx, t.path("/subscriptions"), &names)
	if err != nil {
		return err
	}
	if o.json {
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

func (c *adminClient) subscriptionsReset(ctx context.Context, o adminOpts, name, sub string, out io.Writer) error {
	t, err := parseAdminTopic(name)
	if err != nil {
		return err
	}
	if (o.time == "") == (o.id == "") {
		return errors.New("subscriptions reset: give exactly one of --time and --id")
	}
	base := t.path("/subscription/" + url.PathEscape(sub) + "/resetcursor")
	if o.time != "" {
		ms, err := parseResetTime(o.time, time.Now())
		if err != nil {
			return err
		}
		if _, err := c.do(ctx, http.MethodPost, base+"/"+strconv.FormatInt(ms, 10), nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "reset %s on %s to %s\n", sub, t, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		return nil
	}
	id, err := parseResetID(o.id)
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, base, id); err != nil {
		return err
	}
	fmt.Fprintf(out, "reset %s on %s to %s\n", sub, t, o.id)
	return nil
}

// adminTableInfo is GET …/{topic}/table (gateway/admin_tables.go).
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
		Partition    int   `json:"partition"`
		Log          int64 `json:"log"`
		CompactedEnd int64 `json:"compactedEndOffset"`
		LogEnd       int64 `json:"logEndOffset"`
		Lag          int64 `json:"lag"`
	} `json:"partitions"`
}

func (c *adminClient) tables(ctx context.Context, o adminOpts, name string, out io.Writer) error {
	t, err := parseAdminTopic(name)
	if err != nil {
		return err
	}
	var info adminTableInfo
	raw, err := c.get(ctx, t.path("/table"), &info)
	if err != nil {
		return err
	}
	if o.json {
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
	rows = [][]string{{"PARTITION", "LOG", "COMPACTED END", "LOG END", "LAG"}}
	for _, p := range info.Partitions {
		part := strconv.Itoa(p.Partition)
		if p.Partition < 0 {
			part = "-"
		}
		rows = append(rows, []string{part, strconv.FormatInt(p.Log, 10), strconv.FormatInt(p.CompactedEnd, 10),
			strconv.FormatInt(p.LogEnd, 10), strconv.FormatInt(p.Lag, 10)})
	}
	return table(out, rows)
}
