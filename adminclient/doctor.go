package adminclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lakegate/lakegate/doctor"
)

// ErrDoctorFailed: a diagnosis found a failure (lakegate admin doctor
// exits non-zero); warnings alone do not fail it.
var ErrDoctorFailed = errors.New("doctor: checks failed")

const doctorPath = "/admin/v2/lakegate/doctor"

// Doctor prints the node's diagnosis (package doctor) and, with cluster,
// every member's: each member is asked at the admin URL it advertises; a
// member that advertises none or does not answer is a failure of its
// own. ErrDoctorFailed (wrapped) when a check failed.
func (c *Client) Doctor(ctx context.Context, o Options, cluster bool, out io.Writer) error {
	var first doctor.Report
	raw, err := c.get(ctx, doctorPath, &first)
	if err != nil {
		return err
	}
	reports := []doctor.Report{first}
	raws := []json.RawMessage{raw}
	if cluster {
		for _, m := range first.Members {
			if m.ID == first.Node {
				continue
			}
			r, raw := c.memberReport(ctx, m)
			reports, raws = append(reports, r), append(raws, raw)
		}
	}
	if err := printDoctor(out, o.JSON, cluster, reports, raws); err != nil {
		return err
	}
	failed := 0
	for _, r := range reports {
		for _, ch := range r.Checks {
			if ch.Status == doctor.Fail {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of them, on %d node(s)", ErrDoctorFailed, failed, len(reports))
	}
	return nil
}

// printDoctor prints the reports, or their JSON (a list with cluster).
func printDoctor(out io.Writer, asJSON, cluster bool, reports []doctor.Report, raws []json.RawMessage) error {
	switch {
	case !asJSON:
		return printReports(out, reports)
	case !cluster:
		return printJSON(out, raws[0])
	}
	b, err := json.Marshal(raws)
	if err != nil {
		return err
	}
	return printJSON(out, b)
}

// memberReport asks member m for its diagnosis; a member that cannot be
// asked gets a report of one failed check saying why.
func (c *Client) memberReport(ctx context.Context, m doctor.Member) (doctor.Report, json.RawMessage) {
	fail := func(detail, hint string) (doctor.Report, json.RawMessage) {
		r := doctor.Report{Node: m.ID, Status: doctor.Fail, Checks: []doctor.Check{{Name: "reachable", Status: doctor.Fail, Detail: detail, Hint: hint}}}
		raw, _ := json.Marshal(r)
		return r, raw
	}
	if m.HTTPURL == "" {
		return fail("advertises no admin URL", "start it with an HTTP listener (http.addr) so that members and operators reach it")
	}
	var r doctor.Report
	raw, err := c.at(m.HTTPURL).get(ctx, doctorPath, &r)
	if err != nil {
		return fail(fmt.Sprintf("its admin REST (%s) did not answer: %v", m.HTTPURL, err),
			"the member holds a session but its HTTP surface is unreachable from here: check the process, its http.addr and the network")
	}
	return r, raw
}

// printReports writes each report as a table of its checks, hints below
// the checks they belong to, then a summary line.
func printReports(out io.Writer, reports []doctor.Report) error {
	var warn, fail int
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "node %s: %s\n", r.Node, r.Status)
		rows := [][]string{{"  CHECK", "STATUS", "DETAIL"}}
		for _, ch := range r.Checks {
			rows = append(rows, []string{"  " + ch.Name, ch.Status.String(), ch.Detail})
			if ch.Hint != "" {
				rows = append(rows, []string{"", "", "→ " + ch.Hint})
			}
			switch ch.Status {
			case doctor.Warn:
				warn++
			case doctor.Fail:
				fail++
			}
		}
		if err := table(out, rows); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "\n%d node(s): %d failure(s), %d warning(s)\n", len(reports), fail, warn)
	return err
}
