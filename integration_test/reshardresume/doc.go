// Package reshardresume holds no code: its tests (package
// reshardresume_test) stop resharding migrations on real redis-servers (a
// run's context cancelled midway or in a batch, mid-run checkpoints,
// refused moves and retries, two runs of one migration at once, a window
// ended or abandoned during a run) and resume or rerun them: every key
// ends on its owner with its value, moved once, and the runs' counts add
// up.
package reshardresume
