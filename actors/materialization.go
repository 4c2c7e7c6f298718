package actors

import (
	"container/heap"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// MaterializationPolicy tunes MaterializationSchedule.
type MaterializationPolicy struct {
	// Interval is how long a log that had nothing eligible waits before
	// it is tried again. Default 5 s.
	Interval time.Duration
	// MaxInflight bounds the compactions running at once. Default 2.
	MaxInflight int
	// BackoffMin and BackoffMax bound the delay after a failed call; it
	// doubles per consecutive failure. Defaults 1 s and 1 min.
	BackoffMin, BackoffMax time.Duration
}

func (p MaterializationPolicy) withDefaults() MaterializationPolicy {
	if p.Interval <= 0 {
		p.Interval = 5 * time.Second
	}
	if p.MaxInflight <= 0 {
		p.MaxInflight = 2
	}
	if p.BackoffMin <= 0 {
		p.BackoffMin = time.Second
	}
	if p.BackoffMax < p.BackoffMin {
		p.BackoffMax = max(time.Minute, p.BackoffMin)
	}
	return p
}

// MaterializationSchedule is the pure state of the compaction worker: which logs
// are known, when each is due, which are running. It never blocks and
// holds no goroutines; the worker feeds it the catalog and the results.
type MaterializationSchedule struct {
	policy   MaterializationPolicy
	jobs     map[lakestream.LogID]*scheduledJob
	inflight int
	// waiting holds the jobs neither running nor removed, by due time
	// (then log id): Start and NextDue look at its top only. A job
	// removed while waiting stays in it until it reaches the top.
	waiting jobHeap
}

type scheduledJob struct {
	job      lakestream.MaterializationJob
	dueAt    time.Time
	running  bool
	failures int
	removed  bool // no longer in the catalog; dropped when it finishes
}

// jobHeap is a container/heap of jobs by due time, then log id (a
// deterministic order).
type jobHeap []*scheduledJob

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, j int) bool {
	if c := h[i].dueAt.Compare(h[j].dueAt); c != 0 {
		return c < 0
	}
	return h[i].job.Log < h[j].job.Log
}
func (h jobHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(*scheduledJob)) }
func (h *jobHeap) Pop() any {
	old := *h
	sj := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return sj
}

// top returns the earliest waiting job, dropping removed ones; nil if none.
func (s *MaterializationSchedule) top() *scheduledJob {
	for len(s.waiting) > 0 {
		if sj := s.waiting[0]; !sj.removed {
			return sj
		}
		heap.Pop(&s.waiting)
	}
	return nil
}

// NewMaterializationSchedule returns an empty schedule.
func NewMaterializationSchedule(p MaterializationPolicy) *MaterializationSchedule {
	return &MaterializationSchedule{policy: p.withDefaults(), jobs: map[lakestream.LogID]*scheduledJob{}}
}

// SetJobs replaces the set of logs to compact (a catalog scan). New logs
// are due at once; known ones keep their due time and take the new
// formats; logs no longer listed are dropped (after their running call).
func (s *MaterializationSchedule) SetJobs(now time.Time, jobs []lakestream.MaterializationJob) {
	seen := make(map[lakestream.LogID]bool, len(jobs))
	for _, j := range jobs {
		seen[j.Log] = true
		if sj, ok := s.jobs[j.Log]; ok {
			sj.job, sj.removed = j, false
			continue
		}
		sj := &scheduledJob{job: j, dueAt: now}
		s.jobs[j.Log] = sj
		heap.Push(&s.waiting, sj)
	}
	for id, sj := range s.jobs {
		if seen[id] {
			continue
		}
		sj.removed = true // dropped from waiting when it reaches the top
		if !sj.running {
			delete(s.jobs, id)
		}
	}
}

// Jobs returns the number of logs known.
func (s *MaterializationSchedule) Jobs() int { return len(s.jobs) }

// Inflight returns the number of running calls.
func (s *MaterializationSchedule) Inflight() int { return s.inflight }

// Start returns the jobs due at now, oldest due first, up to the free
// in-flight slots, and marks them running.
func (s *MaterializationSchedule) Start(now time.Time) []lakestream.MaterializationJob {
	free := s.policy.MaxInflight - s.inflight
	if free <= 0 {
		return nil
	}
	var due []*scheduledJob
	for len(due) < free {
		sj := s.top()
		if sj == nil || sj.dueAt.After(now) {
			break
		}
		heap.Pop(&s.waiting)
		due = append(due, sj)
	}
	out := make([]lakestream.MaterializationJob, len(due))
	for i, sj := range due {
		sj.running = true
		out[i] = sj.job
	}
	s.inflight += len(due)
	return out
}

// Done records the end of a running job's call: due again at once when
// More, after Interval when nothing was left, after a doubling backoff on
// error. It reports the backoff applied (0 without error). Unknown or not
// running logs are ignored.
func (s *MaterializationSchedule) Done(now time.Time, id lakestream.LogID, r lakestream.MaterializationResult, err error) time.Duration {
	sj, ok := s.jobs[id]
	if !ok || !sj.running {
		return 0
	}
	sj.running = false
	s.inflight--
	if sj.removed {
		delete(s.jobs, id)
		return 0
	}
	if err != nil {
		d := s.policy.BackoffMin << min(sj.failures, 16)
		if d > s.policy.BackoffMax || d <= 0 {
			d = s.policy.BackoffMax
		}
		sj.failures++
		sj.dueAt = now.Add(d)
		heap.Push(&s.waiting, sj)
		return d
	}
	sj.failures = 0
	if r.More {
		sj.dueAt = now
	} else {
		sj.dueAt = now.Add(s.policy.Interval)
	}
	heap.Push(&s.waiting, sj)
	return 0
}

// NextDue returns the earliest due time of a job that is not running, and
// false when there is none (or no in-flight slot is free: the next Done
// wakes the worker).
func (s *MaterializationSchedule) NextDue() (time.Time, bool) {
	if s.inflight >= s.policy.MaxInflight {
		return time.Time{}, false
	}
	sj := s.top()
	if sj == nil {
		return time.Time{}, false
	}
	return sj.dueAt, true
}
