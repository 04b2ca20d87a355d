package speed_test

import (
	"context"
	"testing"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

// ctx is the context of the calls that need no deadline of their own.
var ctx = context.Background()

func TestMain(m *testing.M) { fixtures.Main(m) }
