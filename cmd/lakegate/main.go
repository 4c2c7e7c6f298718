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
  table scan   print a topic's table rows (csv, json, parquet; table scan -h)
  admin        topics, subscriptions and tables of a running node (admin --help)
  token        create and check authentication keys and tokens (token --help;
               as Pulsar's "pulsar tokens")
  config docs  print every configuration key, its env variable, flag and default
  config check validate a configuration (file, env, flags) as serve would and print it
  version      print the version
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	stopProfile := startCPUProfile()
	stopHeapProfile := startHeapProfile()
	var err error
	switch os.Args[1] {
	case "standalone":
		err = runStandalone(os.Args[2:])
	case "serve":
		err = runServe(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case "admin":
		err = runAdmin(os.Args[2:], os.Environ(), os.Stdout)
	case "table":
		err = runTable(os.Args[2:], os.Stdout)
	case "token":
		err = runToken(os.Args[2:], os.Stdout)
	case "config":
		switch {
		case len(os.Args) == 3 && os.Args[2] == "docs":
			fmt.Print(configDocs())
		case len(os.Args) >= 3 && os.Args[2] == "check":
			err = configCheck(os.Args[3:], os.Environ(), os.Stdout)
		default:
			err = fmt.Errorf("usage: lakegate config docs | lakegate config check [--config FILE] [flags]")
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
	stopHeapProfile()
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lakegate:", err)
		os.Exit(1)
	}
}
