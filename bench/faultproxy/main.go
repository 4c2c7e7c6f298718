package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/lakegate/lakegate/internal/faultproxy"
)

func main() {
	upstream := flag.String("upstream", "", "S3 endpoint base URL (http://host:port)")
	putLatency := flag.Duration("put-latency", 0, "latency added to every PUT")
	getLatency := flag.Duration("get-latency", 0, "latency added to every GET, HEAD, DELETE and POST")
	flag.Parse()
	p, err := faultproxy.Start(*upstream, 1)
	if err != nil {
		log.Fatal(err)
	}
	p.Set(
		faultproxy.Rule{Methods: []string{"PUT"}, Latency: *putLatency},
		faultproxy.Rule{Methods: []string{"GET", "HEAD", "DELETE", "POST"}, Latency: *getLatency},
	)
	fmt.Printf("faultproxy_url=%s\n", p.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	fmt.Println(p.Stats())
	_ = p.Close()
}
