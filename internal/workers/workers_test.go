package workers

import (
	"runtime"
	"slices"
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
