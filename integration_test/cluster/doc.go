// Package cluster holds no code: its tests (package cluster_test) run
// against a real Redis Cluster (three masters with a replica each, started
// once per package by fixtures.SharedCluster): the move of a sharded fleet
// into the cluster (with a master killed and resumed, a failover, pub/sub
// during the move) and the cluster's hash slots checked against the
// server's.
package cluster
