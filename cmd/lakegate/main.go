// Command lakegate is the one lakegate binary.
//
//	lakegate standalone [--data-dir DIR] [--pulsar-addr :6650] [--http-addr :8080]
//	lakegate serve --config FILE      (cluster node; external etcd)
//	lakegate config docs              (prints docs/configuration.md)
//	lakegate bench engine [flags]     (storage-engine benchmark driver)
//	lakegate version
package main

import (
	"fmt"
	"os"
)

var version = "dev"

func usage() {
	fmt.Fprint(os.Stderr, `usage: lakegate <command> [flags]

commands:
  standalone   run a single node on the embedded defaults (etcd in the data dir,
               objects under the data dir)
  serve        run a cluster node against external etcd and an object store
  bench        run benchmarks (bench engine -h for flags)
  config docs  print every configuration key, its env variable, flag and default
  version      print the version
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "standalone":
		err = runStandalone(os.Args[2:])
	case "serve":
		err = runServe(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case "config":
		if len(os.Args) == 3 && os.Args[2] == "docs" {
			fmt.Print(configDocs())
		} else {
			err = fmt.Errorf("usage: lakegate config docs")
		}
	case "version":
		fmt.Println("lakegate", version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "lakegate: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lakegate:", err)
		os.Exit(1)
	}
}
