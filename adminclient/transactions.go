package adminclient

// The transactions commands of the admin CLI, over Pulsar's
// /admin/v3/transactions/ (admin/transactions.go, docs/transactions.md
// "Admin REST"): the coordinators, a transaction, the slow ones, abort.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

const txnPath = "/admin/v3/transactions"

// txnMetadata is what the CLI shows of Pulsar's TransactionMetadata.
type txnMetadata struct {
	TxnID              string                         `json:"txnId"`
	Status             string                         `json:"status"`
	OpenTimestamp      int64                          `json:"openTimestamp"`
	TimeoutAt          int64                          `json:"timeoutAt"`
	Owner              *string                        `json:"owner"`
	ProducedPartitions map[string]struct{}            `json:"producedPartitions"`
	AckedPartitions    map[string]map[string]struct{} `json:"ackedPartitions"`
}

// msTime formats Unix milliseconds ("-" for 0).
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// TxnStats prints every transaction coordinator: the node serving it and
// its transactions.
func (c *Client) TxnStats(ctx context.Context, o Options, out io.Writer) error {
	var stats map[string]struct {
		State          string `json:"state"`
		LeastSigBits   int64  `json:"leastSigBits"`
		LowWaterMark   int64  `json:"lowWaterMark"`
		OngoingTxnSize int64  `json:"ongoingTxnSize"`
	}
	raw, err := c.get(ctx, txnPath+"/coordinatorStats", &stats)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	var hosts []struct {
		ID               int    `json:"id"`
		BrokerServiceURL string `json:"brokerServiceUrl"`
	}
	if _, err := c.get(ctx, txnPath+"/coordinators", &hosts); err != nil {
		return err
	}
	host := map[string]string{}
	for _, h := range hosts {
		host[strconv.Itoa(h.ID)] = h.BrokerServiceURL
	}
	ids := make([]string, 0, len(stats))
	for id := range stats {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { a, _ := strconv.Atoi(ids[i]); b, _ := strconv.Atoi(ids[j]); return a < b })
	rows := [][]string{{"COORDINATOR", "STATE", "ONGOING", "LOW WATER MARK", "LAST SEQUENCE", "SERVED BY"}}
	for _, id := range ids {
		s := stats[id]
		rows = append(rows, []string{id, s.State, strconv.FormatInt(s.OngoingTxnSize, 10),
			strconv.FormatInt(s.LowWaterMark, 10), strconv.FormatInt(s.LeastSigBits, 10), host[id]})
	}
	return table(out, rows)
}

// txnID reads a transaction id given as two numbers.
func txnID(most, least string) (string, error) {
	for _, s := range []string{most, least} {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return "", fmt.Errorf("transaction id %s %s: want two numbers, mostSigBits and leastSigBits", most, least)
		}
	}
	return most + "/" + least, nil
}

// TxnMetadata prints one transaction.
func (c *Client) TxnMetadata(ctx context.Context, o Options, most, least string, out io.Writer) error {
	id, err := txnID(most, least)
	if err != nil {
		return err
	}
	var md txnMetadata
	raw, err := c.get(ctx, txnPath+"/transactionMetadata/"+id, &md)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	owner := "-"
	if md.Owner != nil {
		owner = *md.Owner
	}
	rows := [][]string{
		{"TRANSACTION", md.TxnID},
		{"STATUS", md.Status},
		{"OWNER", owner},
		{"OPENED", msTime(md.OpenTimestamp)},
		{"TIMEOUT AT", msTime(md.TimeoutAt)},
	}
	parts := make([]string, 0, len(md.ProducedPartitions))
	for p := range md.ProducedPartitions {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	for _, p := range parts {
		rows = append(rows, []string{"PRODUCES TO", p})
	}
	var acks []string
	for topic, subs := range md.AckedPartitions {
		for sub := range subs {
			acks = append(acks, topic+" "+sub)
		}
	}
	sort.Strings(acks)
	for _, a := range acks {
		rows = append(rows, []string{"ACKNOWLEDGES ON", a})
	}
	return table(out, rows)
}

// TxnSlow prints the transactions not ended and open longer than d.
func (c *Client) TxnSlow(ctx context.Context, o Options, d string, out io.Writer) error {
	dur, err := time.ParseDuration(d)
	if err != nil || dur < 0 {
		return fmt.Errorf("duration %q: want one like 10m", d)
	}
	var txns map[string]txnMetadata
	raw, err := c.get(ctx, txnPath+"/slowTransactions/"+strconv.FormatInt(dur.Milliseconds(), 10), &txns)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(out, raw)
	}
	list := make([]txnMetadata, 0, len(txns))
	for _, md := range txns {
		list = append(list, md)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].OpenTimestamp < list[j].OpenTimestamp })
	rows := [][]string{{"TRANSACTION", "STATUS", "OPENED", "TIMEOUT AT", "PARTITIONS", "SUBSCRIPTIONS"}}
	for _, md := range list {
		subs := 0
		for _, s := range md.AckedPartitions {
			subs += len(s)
		}
		rows = append(rows, []string{md.TxnID, md.Status, msTime(md.OpenTimestamp), msTime(md.TimeoutAt),
			strconv.Itoa(len(md.ProducedPartitions)), strconv.Itoa(subs)})
	}
	return table(out, rows)
}

// TxnAbort aborts a transaction.
func (c *Client) TxnAbort(ctx context.Context, most, least string, out io.Writer) error {
	id, err := txnID(most, least)
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, txnPath+"/abortTransaction/"+id, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "aborted transaction (%s)\n", strings.ReplaceAll(id, "/", ","))
	return err
}
