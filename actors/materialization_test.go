package actors

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

func job(id lakestream.LogID) lakestream.MaterializationJob {
	return lakestream.MaterializationJob{Stream: lakestream.StreamIdentifier{Namespace: "t/ns", Name: "s"}, Log: id, Delta: true}
}

func logsOf(js []lakestream.MaterializationJob) []lakestream.LogID {
	var out []lakestream.LogID
	for _, j := range js {
		out = append(out, j.Log)
	}
	return out
}

func TestCompactionScheduleBoundsInflightAndOrdersByDueTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewMaterializationSchedule(MaterializationPolicy{Interval: 5 * time.Second, MaxInflight: 2})
	s.SetJobs(t0, []lakestream.MaterializationJob{job(3), job(1), job(2)})
	got := logsOf(s.Start(t0))
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("first start = %v, want [1 2] (due together: by log id)", got)
	}
	if more := s.Start(t0); len(more) != 0 {
		t.Fatalf("started %v beyond MaxInflight", logsOf(more))
	}
	if _, ok := s.NextDue(); ok {
		t.Fatal("NextDue with no free slot should report none")
	}
	// Log 1 compacted something and may have more: due again at once, but
	// log 3 has waited longer.
	s.Done(t0.Add(time.Second), 1, lakestream.MaterializationResult{Records: 10, More: true}, nil)
	if got := logsOf(s.Start(t0.Add(time.Second))); len(got) != 1 || got[0] != 3 {
		t.Fatalf("start after done = %v, want [3]", got)
	}
	// Nothing eligible: back after Interval.
	s.Done(t0.Add(2*time.Second), 2, lakestream.MaterializationResult{}, nil)
	s.Done(t0.Add(2*time.Second), 3, lakestream.MaterializationResult{}, nil)
	if got := logsOf(s.Start(t0.Add(2 * time.Second))); len(got) != 1 || got[0] != 1 {
		t.Fatalf("start = %v, want [1]", got)
	}
	s.Done(t0.Add(3*time.Second), 1, lakestream.MaterializationResult{}, nil)
	due, ok := s.NextDue()
	if !ok || !due.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("NextDue = %v %v, want %v", due, ok, t0.Add(7*time.Second))
	}
	if got := s.Start(t0.Add(6 * time.Second)); len(got) != 0 {
		t.Fatalf("started %v before the interval passed", logsOf(got))
	}
	if got := logsOf(s.Start(t0.Add(7 * time.Second))); len(got) != 2 {
		t.Fatalf("start at interval = %v, want logs 2 and 3", got)
	}
}

func TestCompactionScheduleBacksOffOnErrors(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewMaterializationSchedule(MaterializationPolicy{BackoffMin: time.Second, BackoffMax: 5 * time.Second})
	s.SetJobs(t0, []lakestream.MaterializationJob{job(1)})
	now := t0
	var delays []time.Duration
	for range 5 {
		if got := s.Start(now); len(got) != 1 {
			t.Fatalf("at %v: started %d jobs, want 1", now.Sub(t0), len(got))
		}
		d := s.Done(now, 1, lakestream.MaterializationResult{}, errors.New("store down"))
		delays = append(delays, d)
		if got := s.Start(now.Add(d - time.Millisecond)); len(got) != 0 {
			t.Fatal("started before the backoff passed")
		}
		now = now.Add(d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("backoffs = %v, want %v", delays, want)
		}
	}
	s.Start(now)
	if d := s.Done(now, 1, lakestream.MaterializationResult{}, nil); d != 0 {
		t.Fatalf("success returned backoff %v", d)
	}
	s.Start(now.Add(time.Hour))
	if d := s.Done(now.Add(time.Hour), 1, lakestream.MaterializationResult{}, errors.New("again")); d != time.Second {
		t.Fatalf("backoff after a success = %v, want it reset to 1s", d)
	}
}

func TestCompactionScheduleFollowsTheCatalog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewMaterializationSchedule(MaterializationPolicy{MaxInflight: 4})
	s.SetJobs(t0, []lakestream.MaterializationJob{job(1), job(2)})
	s.Start(t0) // both running
	s.SetJobs(t0, []lakestream.MaterializationJob{job(2), job(3)})
	if s.Jobs() != 3 {
		t.Fatalf("jobs = %d, want 3 (log 1 kept until its call ends)", s.Jobs())
	}
	if got := logsOf(s.Start(t0)); len(got) != 1 || got[0] != 3 {
		t.Fatalf("start = %v, want [3]", got)
	}
	s.Done(t0, 1, lakestream.MaterializationResult{More: true}, nil)
	if s.Jobs() != 2 || s.Inflight() != 2 {
		t.Fatalf("after the removed log finished: jobs %d inflight %d, want 2 and 2", s.Jobs(), s.Inflight())
	}
	if got := s.Start(t0); len(got) != 0 {
		t.Fatalf("a removed log was started again: %v", logsOf(got))
	}
	// A formats change reaches the next call.
	j := job(2)
	j.Iceberg = true
	s.SetJobs(t0, []lakestream.MaterializationJob{j, job(3)})
	s.Done(t0, 2, lakestream.MaterializationResult{More: true}, nil)
	got := s.Start(t0)
	if len(got) != 1 || !got[0].Iceberg {
		t.Fatalf("start = %+v, want log 2 with Iceberg", got)
	}
	// Unknown and not-running logs are ignored.
	s.Done(t0, 99, lakestream.MaterializationResult{}, nil)
	s.Done(t0, 3, lakestream.MaterializationResult{}, nil)
	s.Done(t0, 3, lakestream.MaterializationResult{}, nil)
	if s.Inflight() != 1 {
		t.Fatalf("inflight = %d, want 1", s.Inflight())
	}
}

// TestCompactionScheduleMatchesAModel: random catalog changes, starts and
// results; every Start returns what a plain scan of the jobs would (the
// oldest due not running, ties by log id, up to the free slots), and
// NextDue the earliest of them.
func TestCompactionScheduleMatchesAModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type mj struct {
		due     time.Time
		running bool
		removed bool
	}
	for round := range 50 {
		s := NewMaterializationSchedule(MaterializationPolicy{Interval: 5 * time.Second, MaxInflight: 3, BackoffMin: time.Second})
		model := map[lakestream.LogID]*mj{}
		now := time.Unix(1000, 0)
		var running []lakestream.LogID
		for step := range 300 {
			now = now.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
			switch op := r.IntN(10); {
			case op == 0: // a catalog scan: a random subset of logs 1..12
				var jobs []lakestream.MaterializationJob
				listed := map[lakestream.LogID]bool{}
				for id := lakestream.LogID(1); id <= 12; id++ {
					if r.IntN(4) > 0 {
						jobs = append(jobs, job(id))
						listed[id] = true
					}
				}
				s.SetJobs(now, jobs)
				for id := range listed {
					if m := model[id]; m != nil {
						m.removed = false
					} else {
						model[id] = &mj{due: now}
					}
				}
				for id, m := range model {
					if !listed[id] {
						if m.running {
							m.removed = true
						} else {
							delete(model, id)
						}
					}
				}
			case op < 6 && len(running) > 0: // a call ends
				i := r.IntN(len(running))
				id := running[i]
				running = slices.Delete(running, i, i+1)
				var err error
				res := lakestream.MaterializationResult{More: r.IntN(3) == 0}
				if r.IntN(5) == 0 {
					err = errors.New("boom")
				}
				d := s.Done(now, id, res, err)
				m := model[id]
				m.running = false
				switch {
				case m.removed:
					delete(model, id)
				case err != nil:
					m.due = now.Add(d)
				case res.More:
					m.due = now
				default:
					m.due = now.Add(5 * time.Second)
				}
			default: // start what is due
				var want []lakestream.LogID
				for id, m := range model {
					if !m.running && !m.removed && !m.due.After(now) {
						want = append(want, id)
					}
				}
				slices.SortFunc(want, func(a, b lakestream.LogID) int {
					if c := model[a].due.Compare(model[b].due); c != 0 {
						return c
					}
					return cmp.Compare(a, b)
				})
				want = want[:min(len(want), 3-len(running))]
				got := logsOf(s.Start(now))
				if !slices.Equal(got, want) {
					t.Fatalf("round %d step %d: started %v, want %v", round, step, got, want)
				}
				for _, id := range got {
					model[id].running = true
				}
				running = append(running, got...)
			}
			var next time.Time
			found := false
			for _, m := range model {
				if !m.running && !m.removed && (!found || m.due.Before(next)) {
					next, found = m.due, true
				}
			}
			if len(running) >= 3 {
				found = false
			}
			if got, ok := s.NextDue(); ok != found || ok && !got.Equal(next) {
				t.Fatalf("round %d step %d: NextDue %v %v, want %v %v", round, step, got, ok, next, found)
			}
		}
	}
}
