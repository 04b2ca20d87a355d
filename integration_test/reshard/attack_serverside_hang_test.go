package reshard_test

import (
	"testing"
	"time"
)

// TestAttackServerSideLongHang: TestReshardHungDestination's ServerSide
// run with a hang longer than MIGRATE's own timeout (2 s), of the new
// owner (5 s: MIGRATEs fail with IOERR while it is still stopped, and its
// drain waits), and of an old owner (5 s: its transaction's reply is lost
// and settled once it answers). No deleted key is back, every value is
// the last acknowledged one, every TTL the key's absolute expiry.
func TestAttackServerSideLongHang(t *testing.T) {
	t.Run("new owner", func(t *testing.T) { hungShard(t, true, 3, 5*time.Second) })
	t.Run("old owner", func(t *testing.T) { hungShard(t, true, 0, 5*time.Second) })
}
