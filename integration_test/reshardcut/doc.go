// Package reshardcut holds no code: its tests (package reshardcut_test)
// cut resharding migrations short on real redis-servers (a run's context
// cancelled at each of its commands, concurrent runs, mid-run checkpoints,
// retries) and resume or rerun them: every key ends on its owner with its
// value and TTL, and no copy is left behind.
package reshardcut
