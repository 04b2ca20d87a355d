// Package reshardcut holds no code: its tests (package reshardcut_test)
// cut resharding migrations short on real redis-servers, a run's context
// cancelled at each of its commands in turn (alone and with concurrent
// runs), and run them again: every key ends on its owner alone, with its
// value and TTL.
package reshardcut
