// Package workers runs the shards of a fan-out in parallel on goroutines
// kept between calls.
package workers

import (
	"sync"
	"time"
)

// The shards of a fan-out (a pipeline's groups, a multi-key command's
// parts, a migration batch) run in parallel, each but the last on a worker:
// a goroutine kept between calls. A goroutine started afresh for every
// shard of every call begins with the smallest stack and grows it, copying
// it, in go-redis's read path each time (runtime.newstack and copystack
// took a sizeable share of a sharded pipeline's CPU); a kept one has grown
// it already. A worker idle for workerIdle ends, so that none outlives a
// burst of calls for long (nor a test that checks for leaked goroutines).
var workers = make(chan func()) // unbuffered: a send succeeds only to an idle worker

// workerIdle is how long a worker waits for its next call before it ends.
const workerIdle = 100 * time.Millisecond

// Go runs f on an idle worker, or on a new one when none is idle. It does
// not wait for f.
func Go(f func()) {
	select {
	case workers <- f:
	default:
		go work(f)
	}
}

// work runs f, then the calls handed to it, until it has been idle for
// workerIdle.
func work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-workers:
		case <-idle.C:
			return
		}
	}
}

// Each runs do(j) for every j in [0, n) for which skip (nil: none) is
// false, in parallel: each on a worker (Go) but the last, which runs on the
// calling goroutine, so that one job needs no worker. It returns once every
// do has returned.
func Each(n int, skip func(j int) bool, do func(j int)) {
	var wg sync.WaitGroup
	last := -1
	for j := range n {
		if skip != nil && skip(j) {
			continue
		}
		if k := last; k >= 0 {
			wg.Add(1)
			Go(func() {
				defer wg.Done()
				do(k)
			})
		}
		last = j
	}
	if last >= 0 {
		do(last)
	}
	wg.Wait()
}
