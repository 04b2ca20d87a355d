package workers

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Workers run every call handed to them and end once idle.
func TestWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	done := make(chan int, 3)
	for range 2 { // the second round may reuse the first round's workers
		for i := range 3 {
			Go(func() { done <- i })
		}
		got := []int{<-done, <-done, <-done}
		if slices.Sort(got); !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("calls ran %v, want [0 1 2]", got)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 5 s after the calls, %d before: idle workers do not end", runtime.NumGoroutine(), before)
		}
	}
}

// Each runs every job not skipped once, the last on the caller's goroutine,
// and returns after all of them.
func TestEach(t *testing.T) {
	for _, c := range []struct {
		n    int
		skip []int // nil: no skip function at all
		want []int
	}{
		{0, nil, nil},
		{1, nil, []int{0}},
		{4, nil, []int{0, 1, 2, 3}},
		{5, []int{0, 2, 4}, []int{1, 3}},
		{3, []int{}, []int{0, 1, 2}},
		{3, []int{0, 1, 2}, nil},
	} {
		ran := make([]int, c.n)
		var onCaller []int
		caller := goroutineID()
		var mu sync.Mutex
		var skip func(int) bool
		if c.skip != nil {
			skip = func(j int) bool { return slices.Contains(c.skip, j) }
		}
		Each(c.n, skip, func(j int) {
			mu.Lock()
			defer mu.Unlock()
			ran[j]++
			if goroutineID() == caller {
				onCaller = append(onCaller, j)
			}
		})
		var got []int
		for j, times := range ran {
			if times > 1 {
				t.Fatalf("n=%d skip=%v: job %d ran %d times", c.n, c.skip, j, times)
			}
			if times == 1 {
				got = append(got, j)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("n=%d skip=%v: ran %v, want %v", c.n, c.skip, got, c.want)
		}
		if len(c.want) > 0 && !slices.Equal(onCaller, c.want[len(c.want)-1:]) {
			t.Fatalf("n=%d skip=%v: jobs %v ran on the caller's goroutine, want the last, %d", c.n, c.skip, onCaller, c.want[len(c.want)-1])
		}
	}
}

// goroutineID returns the number of the calling goroutine, read from the
// first line of its stack trace ("goroutine 7 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}
