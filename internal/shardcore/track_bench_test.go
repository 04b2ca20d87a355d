package shardcore_test

import (
	"testing"

	"github.com/shardedcache/shardedcache/internal/shardcore"
)

// BenchmarkTrackInWindow is Track on keys of a window that takes a, b, c to
// a, b, c, d, with no shard ejected and with d ejected: the routing a
// command's key pays inside a window (no I/O).
func BenchmarkTrackInWindow(b *testing.B) {
	for _, tc := range []struct {
		name  string
		eject bool
	}{{"all-live", false}, {"destination-ejected", true}} {
		b.Run(tc.name, func(b *testing.B) {
			clients := newClients("a", "b", "c", "d")
			s, err := shardcore.New(shardList(clients[:3]), shardcore.Backend[*testClient]{
				Health: shardcore.Health[*testClient]{Mode: shardcore.EjectMode, FailureLimit: 1}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.BeginWindow(shardList(clients), nil, nil); err != nil {
				b.Fatal(err)
			}
			if tc.eject {
				clients[3].down.Store(true)
				v := s.Acquire()
				_ = v.Finish(b.Context(), 3, v.Client(3).do())
				v.Release()
			}
			keys := testKeys(1024)
			v := s.Acquire()
			defer v.Release()
			var p shardcore.Pending
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p.Reset()
				v.Track(&p, keys[i&1023])
				i++
			}
		})
	}
}
