package shardcore

// HasStandIns reports whether some shard of v is ejected, its keys served
// by stand-ins.
func (v *View[C]) HasStandIns() bool { return v.live != v.full }

// StandIn reports whether key is served by a stand-in in v: the shard that
// owns it with every shard live is ejected.
func (v *View[C]) StandIn(key string) bool {
	return v.live != v.full && v.rejoined().Locate(key) != v.live.Locate(key)
}

// LiveEpoch counts the changes before v of which shard serves which key:
// ejections, rejoins and shard-list changes. Two views with the same epoch
// have the same stand-ins. A backend ties what a stand-in hands out
// (memcache CAS tokens) to it.
func (v *View[C]) LiveEpoch() uint64 { return v.liveEpoch }
