//go:build linux

package objstore_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

// BenchmarkFilePutIfAbsent creates 64 KiB objects (a small WAL object) with
// fsync on the file store, by each create path; cpu-ms/op is the process's
// user+system CPU per create, most of it in the kernel.
func BenchmarkFilePutIfAbsent(b *testing.B) {
	for _, named := range []bool{false, true} {
		name := "unnamed"
		if named {
			name = "named-temp"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, fileURL(b.TempDir()))
			if named {
				objstore.NamedTempOnly(s)
			}
			data := make([]byte, 64<<10)
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := s.PutIfAbsent(b.Context(), fmt.Sprintf("wal/n/%08d", i), data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}

func cpuTime() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
