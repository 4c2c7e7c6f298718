package txncheck

import (
	"fmt"
	"slices"
	"strings"
)

// Outcome is what the client was told of a transaction's end.
type Outcome int

const (
	// Unknown: the commit or the abort failed or timed out, or the client
	// never asked (its sends failed and its abort failed too); the
	// coordinator decides (by its timeout if nothing else).
	Unknown Outcome = iota
	// Committed: the commit was acknowledged.
	Committed
	// Aborted: the abort was acknowledged.
	Aborted
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	default:
		return "unknown"
	}
}

// Txn is one transaction of a writer.
type Txn struct {
	// Name identifies the transaction in reports (e.g. "w2-t17").
	Name string
	// Writer and Seq: the writer that ran it and its place among that
	// writer's transactions (a writer runs one at a time, so Seq orders
	// its commits).
	Writer, Seq int
	// Writes are the values sent, per partition, in send order; every
	// value of the history is unique.
	Writes map[int][]string
	// Acks are the inputs (their values) the transaction acknowledged.
	Acks []string
	// CommitAsked: the client sent the commit (without it, the
	// transaction can only abort).
	CommitAsked bool
	Outcome     Outcome
}

// Read is one message a view received.
type Read struct {
	Partition int
	Value     string
	// ID is the message's id (its position), printed.
	ID string
}

// View is what one reader read, in receive order.
type View struct {
	Name string
	// Complete: the view read, in every partition, past a point after
	// every transaction had ended (LostWrite and Atomicity apply).
	Complete bool
	// Ordered: the view read each partition once, in the partition's
	// order (Order applies).
	Ordered bool
	Reads   []Read
}

// History is a workload's record.
type History struct {
	Txns  []Txn
	Views []View
	// Inputs are the values of an input topic that transactions consume
	// and acknowledge (none: no acknowledgement is checked), and Left what
	// a consumer of that subscription received after every transaction
	// had ended: the inputs no committed transaction acknowledged.
	Inputs []string
	Left   []Read
}

// Kind names an invariant.
type Kind string

const (
	AbortedRead Kind = "aborted-read"
	LostWrite   Kind = "lost-write"
	Duplicate   Kind = "duplicate"
	UnknownRead Kind = "unknown-value"
	Order       Kind = "order"
	Atomicity   Kind = "atomicity"
	// Acknowledgements in transactions: an input acknowledged by two
	// committed transactions (AckTwice), acknowledged by a committed one
	// and delivered after the end (AckLost), or neither acknowledged by a
	// committed one nor delivered after the end (InputLost).
	AckTwice  Kind = "ack-twice"
	AckLost   Kind = "ack-lost"
	InputLost Kind = "input-lost"
)

// Kinds lists every invariant.
var Kinds = []Kind{AbortedRead, LostWrite, Duplicate, UnknownRead, Order, Atomicity, AckTwice, AckLost, InputLost}

// Violation is one broken invariant, with its evidence.
type Violation struct {
	Kind      Kind
	View      string
	Txn       string // "" when no transaction is concerned
	Partition int
	Values    []string
	Detail    string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in view %s", v.Kind, v.View)
	if v.Txn != "" {
		fmt.Fprintf(&b, ", transaction %s", v.Txn)
	}
	fmt.Fprintf(&b, ", partition %d: %v", v.Partition, v.Values)
	if v.Detail != "" {
		b.WriteString(": " + v.Detail)
	}
	return b.String()
}

// Stats counts a history.
type Stats struct {
	Txns                        int
	Committed, Aborted, Unknown int
	// UnknownSeen and UnknownUnseen: transactions of unknown outcome
	// whose values the complete views read (they committed), or did not.
	UnknownSeen, UnknownUnseen int
	Values                     int // values sent
	Reads                      int // reads over all views
	// Acked: inputs acknowledged by committed transactions (Committed,
	// or Unknown and read); Left: inputs delivered after the end.
	Acked, Left int
}

// Result is Check's verdict.
type Result struct {
	Stats      Stats
	Violations []Violation
}

// OK reports whether no invariant is broken.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// ViolationsMax bounds the violations Check reports per kind and view (the
// rest are counted in the last one's Detail).
const ViolationsMax = 20

// written is where a value was sent.
type written struct {
	txn       *Txn
	partition int
	index     int // in the transaction's sends to partition
}

// Check judges h. It panics if a value is written twice (the workload's
// bug, not the system's).
func Check(h History) Result {
	var r Result
	at := map[string]written{}
	for i := range h.Txns {
		tx := &h.Txns[i]
		r.Stats.Txns++
		switch tx.Outcome {
		case Committed:
			r.Stats.Committed++
		case Aborted:
			r.Stats.Aborted++
		default:
			r.Stats.Unknown++
		}
		for p, vs := range tx.Writes {
			for k, v := range vs {
				if _, dup := at[v]; dup {
					panic(fmt.Sprintf("txncheck: value %q written twice", v))
				}
				at[v] = written{tx, p, k}
				r.Stats.Values++
			}
		}
	}
	// unknownSeen: per transaction of unknown outcome, whether each
	// complete view read some of it (committed) or none (aborted).
	unknownSeen := map[string]map[bool][]string{}
	for _, view := range h.Views {
		r.Stats.Reads += len(view.Reads)
		c := &viewCheck{view: view, at: at, r: &r, counts: map[Kind]int{}}
		c.reads()
		if view.Complete {
			c.complete(h.Txns, unknownSeen)
		}
		if view.Ordered {
			c.order()
		}
		c.flush()
	}
	for i := range h.Txns {
		tx := &h.Txns[i]
		if tx.Outcome != Unknown {
			continue
		}
		seen := unknownSeen[tx.Name]
		if len(seen[true]) > 0 {
			r.Stats.UnknownSeen++
		} else {
			r.Stats.UnknownUnseen++
		}
		if len(seen[true]) > 0 && len(seen[false]) > 0 {
			r.Violations = append(r.Violations, Violation{Kind: Atomicity, View: strings.Join(seen[false], ","), Txn: tx.Name,
				Partition: partitions(tx)[0], Values: tx.Writes[partitions(tx)[0]],
				Detail: fmt.Sprintf("outcome unknown: views %v read it, these read none of it", seen[true])})
		}
	}
	if len(h.Inputs) > 0 {
		r.acks(h, func(tx *Txn) bool { return tx.Outcome == Committed || len(unknownSeen[tx.Name][true]) > 0 })
	}
	return r
}

// acks checks the inputs: each acknowledged by at most one committed
// transaction, and delivered after the end if and only if none did.
func (r *Result) acks(h History, committed func(*Txn) bool) {
	by := map[string][]string{} // input → the committed transactions that acknowledged it
	for i := range h.Txns {
		if tx := &h.Txns[i]; committed(tx) {
			for _, in := range tx.Acks {
				by[in] = append(by[in], tx.Name)
			}
		}
	}
	left := map[string]string{} // input → its position after the end
	for _, rd := range h.Left {
		left[rd.Value] = rd.ID
	}
	r.Stats.Left = len(left)
	counts := map[Kind]int{}
	report := func(v Violation) {
		v.View = "inputs"
		if counts[v.Kind]++; counts[v.Kind] <= ViolationsMax {
			r.Violations = append(r.Violations, v)
		}
	}
	for _, in := range h.Inputs {
		txs := by[in]
		if len(txs) > 0 {
			r.Stats.Acked++
		}
		id, isLeft := left[in]
		switch {
		case len(txs) > 1:
			report(Violation{Kind: AckTwice, Txn: txs[0], Values: []string{in},
				Detail: fmt.Sprintf("acknowledged by the committed transactions %v", txs)})
		case len(txs) == 1 && isLeft:
			report(Violation{Kind: AckLost, Txn: txs[0], Values: []string{in},
				Detail: fmt.Sprintf("acknowledged by a committed transaction, delivered again at %s after the end", id)})
		case len(txs) == 0 && !isLeft:
			report(Violation{Kind: InputLost, Values: []string{in},
				Detail: "acknowledged by no committed transaction, not delivered after the end"})
		}
	}
	for _, k := range []Kind{AckTwice, AckLost, InputLost} {
		if n := counts[k]; n > ViolationsMax {
			r.Violations = append(r.Violations, Violation{Kind: k, View: "inputs",
				Detail: fmt.Sprintf("%d more %s violations not listed", n-ViolationsMax, k)})
		}
	}
}

// viewCheck checks one view.
type viewCheck struct {
	view   View
	at     map[string]written
	r      *Result
	counts map[Kind]int // violations per kind, reported or not
}

func (c *viewCheck) report(v Violation) {
	v.View = c.view.Name
	if c.counts[v.Kind]++; c.counts[v.Kind] <= ViolationsMax {
		c.r.Violations = append(c.r.Violations, v)
	}
}

// flush notes the violations left out.
func (c *viewCheck) flush() {
	for _, k := range Kinds {
		if n := c.counts[k]; n > ViolationsMax {
			c.r.Violations = append(c.r.Violations, Violation{Kind: k, View: c.view.Name,
				Detail: fmt.Sprintf("%d more %s violations not listed", n-ViolationsMax, k)})
		}
	}
}

// reads checks each read alone, and the positions: AbortedRead,
// UnknownRead, Duplicate.
func (c *viewCheck) reads() {
	type key struct {
		p int
		s string
	}
	idsOf := map[key][]string{}    // (partition, value) → distinct ids
	valuesAt := map[key][]string{} // (partition, id) → distinct values
	var order []key
	for _, rd := range c.view.Reads {
		w, ok := c.at[rd.Value]
		switch {
		case !ok:
			c.report(Violation{Kind: UnknownRead, Partition: rd.Partition, Values: []string{rd.Value},
				Detail: fmt.Sprintf("read at %s, never written", rd.ID)})
		case w.partition != rd.Partition:
			c.report(Violation{Kind: UnknownRead, Txn: w.txn.Name, Partition: rd.Partition, Values: []string{rd.Value},
				Detail: fmt.Sprintf("read at %s, written to partition %d", rd.ID, w.partition)})
		case w.txn.Outcome == Aborted || !w.txn.CommitAsked:
			c.report(Violation{Kind: AbortedRead, Txn: w.txn.Name, Partition: rd.Partition, Values: []string{rd.Value},
				Detail: fmt.Sprintf("read at %s; the transaction %s (commit asked: %v)", rd.ID, w.txn.Outcome, w.txn.CommitAsked)})
		}
		kv, ki := key{rd.Partition, rd.Value}, key{rd.Partition, rd.ID}
		if len(idsOf[kv]) == 0 {
			order = append(order, kv)
		}
		if !slices.Contains(idsOf[kv], rd.ID) {
			idsOf[kv] = append(idsOf[kv], rd.ID)
		}
		if !slices.Contains(valuesAt[ki], rd.Value) {
			valuesAt[ki] = append(valuesAt[ki], rd.Value)
			if len(valuesAt[ki]) == 2 {
				c.report(Violation{Kind: Duplicate, Partition: rd.Partition, Values: valuesAt[ki],
					Detail: fmt.Sprintf("one position %s holds two values", rd.ID)})
			}
		}
	}
	for _, kv := range order {
		if ids := idsOf[kv]; len(ids) > 1 {
			name := ""
			if w, ok := c.at[kv.s]; ok {
				name = w.txn.Name
			}
			c.report(Violation{Kind: Duplicate, Txn: name, Partition: kv.p, Values: []string{kv.s},
				Detail: fmt.Sprintf("read at %d positions %v", len(ids), ids)})
		}
	}
}

// complete checks what a complete view must hold: LostWrite, Atomicity.
func (c *viewCheck) complete(txns []Txn, unknownSeen map[string]map[bool][]string) {
	read := map[string]bool{}
	for _, rd := range c.view.Reads {
		if w, ok := c.at[rd.Value]; ok && w.partition == rd.Partition {
			read[rd.Value] = true
		}
	}
	for i := range txns {
		tx := &txns[i]
		switch tx.Outcome {
		case Committed:
			for _, p := range partitions(tx) {
				var lost []string
				for _, v := range tx.Writes[p] {
					if !read[v] {
						lost = append(lost, v)
					}
				}
				if len(lost) > 0 {
					c.report(Violation{Kind: LostWrite, Txn: tx.Name, Partition: p, Values: lost,
						Detail: fmt.Sprintf("committed, %d of %d values of the partition not read", len(lost), len(tx.Writes[p]))})
				}
			}
		case Unknown:
			var seen, unseen []string
			unseenAt := -1
			for _, p := range partitions(tx) {
				for _, v := range tx.Writes[p] {
					if read[v] {
						seen = append(seen, v)
					} else {
						unseen = append(unseen, v)
						if unseenAt < 0 {
							unseenAt = p
						}
					}
				}
			}
			if unknownSeen[tx.Name] == nil {
				unknownSeen[tx.Name] = map[bool][]string{}
			}
			unknownSeen[tx.Name][len(seen) > 0] = append(unknownSeen[tx.Name][len(seen) > 0], c.view.Name)
			if len(seen) > 0 && len(unseen) > 0 {
				c.report(Violation{Kind: Atomicity, Txn: tx.Name, Partition: unseenAt, Values: unseen,
					Detail: fmt.Sprintf("outcome unknown: read %v but not these", seen)})
			}
		}
	}
}

// order checks Order on an ordered view: per partition and writer, the
// first reads of committed values must follow (Seq, send index); each
// read is compared with the one before it.
func (c *viewCheck) order() {
	type last struct {
		seq, index int
		value      string
		txn        string
	}
	prev := map[[2]int]last{} // (partition, writer) → the last committed value read
	done := map[string]bool{}
	for _, rd := range c.view.Reads {
		w, ok := c.at[rd.Value]
		if !ok || w.partition != rd.Partition || done[rd.Value] || w.txn.Outcome != Committed {
			continue
		}
		done[rd.Value] = true
		k := [2]int{rd.Partition, w.txn.Writer}
		cur := last{w.txn.Seq, w.index, rd.Value, w.txn.Name}
		if p, ok := prev[k]; ok && (cur.seq < p.seq || cur.seq == p.seq && cur.index < p.index) {
			what := "a transaction's values out of send order"
			if cur.seq != p.seq {
				what = fmt.Sprintf("writer %d's transaction %s read after its later transaction %s", w.txn.Writer, cur.txn, p.txn)
			}
			c.report(Violation{Kind: Order, Txn: cur.txn, Partition: rd.Partition, Values: []string{p.value, rd.Value},
				Detail: fmt.Sprintf("%s (%s at %s)", what, rd.Value, rd.ID)})
		}
		prev[k] = cur // an inversion is reported once, not against every later value
	}
}

// partitions lists tx's partitions in order.
func partitions(tx *Txn) []int {
	ps := make([]int, 0, len(tx.Writes))
	for p := range tx.Writes {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// LeftExpected lists the inputs a consumer of the input subscription
// should receive once every transaction has ended: those no committed
// transaction acknowledged (Committed, or Unknown and read by a complete
// view). A workload waits for them (an aborted transaction's
// acknowledgement is dropped asynchronously) before it fills Left.
func LeftExpected(h History) []string {
	read := map[string]bool{}
	for _, v := range h.Views {
		if v.Complete {
			for _, rd := range v.Reads {
				read[rd.Value] = true
			}
		}
	}
	acked := map[string]bool{}
	for _, tx := range h.Txns {
		committed := tx.Outcome == Committed
		for _, vs := range tx.Writes {
			for _, v := range vs {
				committed = committed || tx.Outcome == Unknown && read[v]
			}
		}
		if committed {
			for _, in := range tx.Acks {
				acked[in] = true
			}
		}
	}
	var left []string
	for _, in := range h.Inputs {
		if !acked[in] {
			left = append(left, in)
		}
	}
	return left
}
