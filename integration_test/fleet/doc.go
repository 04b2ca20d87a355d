// Package fleet holds no code: its tests (package fleet_test) run several
// members of one fleet (the fleet package) on real redis-servers and attack
// its coordination: late fences, late drops of stale copies, live counters
// during changes, respelled addresses, a restart with a new store, two DBs
// of one server, bad input.
package fleet
