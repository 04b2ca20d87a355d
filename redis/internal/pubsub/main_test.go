package pubsub

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no fan-in leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
