package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startCPUProfile writes a CPU profile of the whole process to the file
// named by LAKEGATE_CPUPROFILE (for benchmarks: bench/compare.sh), from
// start to a clean exit (SIGTERM included); "%p" in the name is the
// process id (several processes of one cluster). With
// LAKEGATE_CPUPROFILE_ON=SIGUSR1 the profile starts at that signal instead
// and ends at the next one (bench/idle-cost.sh: the measured window, not
// the start). The returned function stops it.
func startCPUProfile() func() {
	path := strings.ReplaceAll(os.Getenv("LAKEGATE_CPUPROFILE"), "%p", strconv.Itoa(os.Getpid()))
	if path == "" {
		return func() {}
	}
	if os.Getenv("LAKEGATE_CPUPROFILE_ON") != "SIGUSR1" {
		return profileTo(path)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	var mu sync.Mutex
	var stop func() // of the profile running, if one is
	halt := func() {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			stop()
			stop = func() {} // written: a later signal starts nothing
		}
	}
	go func() {
		<-sig
		mu.Lock()
		if stop == nil {
			stop = profileTo(path)
		}
		mu.Unlock()
		<-sig
		halt()
	}()
	return func() {
		signal.Stop(sig)
		halt()
	}
}

// profileTo starts a CPU profile into path; the returned function stops it.
func profileTo(path string) func() {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lakegate: cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "lakegate: cpu profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// startHeapProfile keeps a heap profile of the process's peak in the file
// named by LAKEGATE_HEAPPROFILE (for benchmarks and memory budget work):
// every second it looks at the heap in use and, when it is the highest
// seen, writes the profile again. The returned function stops it.
func startHeapProfile() func() {
	path := os.Getenv("LAKEGATE_HEAPPROFILE")
	if path == "" {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var peak uint64
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak {
				peak = v
				if err := writeHeapProfile(path); err != nil {
					fmt.Fprintln(os.Stderr, "lakegate: heap profile:", err)
					return
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
