// Package genmain is the main function of this module's code generators
// (redis/internal/commands/gen, redis/internal/methods/gen): a flag -o for
// the output file, and the generated source written there, or the error
// logged with the generator's name.
package genmain

import (
	"flag"
	"log"
	"os"
)

// Run parses the flags, calls generate and writes its source to -o
// (default out); on error it logs it, prefixed "name: ", and exits 1.
func Run(name, out string, generate func() ([]byte, error)) {
	o := flag.String("o", out, "the file to write")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
	src, err := generate()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*o, src, 0o644); err != nil {
		log.Fatal(err)
	}
}
