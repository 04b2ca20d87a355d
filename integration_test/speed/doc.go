// Package speed holds no code: its benchmarks (package speed_test) measure
// this SDK against the clients it is compared with, on real servers they
// start themselves:
//
//	go test -run '^$' -bench Speed -count 6 ./integration_test/speed | tee new.txt
package speed
