package redis

// ResumeResharding opens a resharding window to shards as BeginResharding
// does, for a process that takes over a window another process opened and
// did not finish (it crashed or was killed mid-migration), and that this
// client's current list is that window's old list. The keys the first
// process moved are on their new owners; BeginResharding would take them
// for stale copies and delete them. ResumeResharding deletes nothing: the
// first window's BeginResharding removed the stale copies once, and every
// copy on a new owner since was moved or written in that window, so it is
// the newer one, as the window's rule says. A move the first process left
// marked on a source is settled as any abandoned move is (see package
// fleet): finished if its new owner restored it, else taken back.
//
// Resume the first window's migration from its last checkpoint: set
// Checkpoint.Window to this window's ID (Window().ID), since NewMigration
// accepts only checkpoints of its own window. Use it only when every client
// that wrote in the first window has switched to shards, as for
// BeginResharding. It returns BeginResharding's errors but the failure to
// remove stale copies.
func (c *ShardedClient) ResumeResharding(shards []ShardOptions) error {
	if err := c.clusterSourceErr(shards); err != nil {
		return err
	}
	return c.switchShards(shards, c.beginWindow("", 0, nil, nil))
}
