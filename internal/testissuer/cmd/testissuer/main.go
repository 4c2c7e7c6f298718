package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lakegate/lakegate/internal/testissuer"
)

type clientList []testissuer.Client

func (l *clientList) String() string { return fmt.Sprint(len(*l), " clients") }

func (l *clientList) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%q is not id:secret[:subject]", s)
	}
	c := testissuer.Client{ID: parts[0], Secret: parts[1]}
	if len(parts) == 3 {
		c.Subject = parts[2]
	}
	*l = append(*l, c)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testissuer:", err)
		os.Exit(1)
	}
}

func run() error {
	var clients clientList
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "directory for the clients' credentials files (required)")
	audience := flag.String("audience", "", "aud of tokens whose request names none")
	ttl := flag.Duration("ttl", time.Hour, "lifetime of issued tokens")
	alg := flag.String("alg", "RS256", "signing algorithm: RS256 or ES256")
	flag.Var(&clients, "client", "a client, id:secret[:subject] (repeatable; subject defaults to the id)")
	flag.Parse()
	if *dir == "" || len(clients) == 0 {
		return fmt.Errorf("usage: testissuer -dir DIR -client id:secret[:subject] … [-audience A] [-ttl 1h] [-alg RS256]")
	}
	is, err := testissuer.Start(testissuer.Options{Addr: *addr, Alg: *alg, TTL: *ttl, Audience: *audience})
	if err != nil {
		return err
	}
	defer is.Close()
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	for _, c := range clients {
		is.AddClient(c)
		if err := os.WriteFile(filepath.Join(*dir, c.ID+".json"), is.CredentialsJSON(c.ID), 0o600); err != nil {
			return err
		}
	}
	fmt.Printf("testissuer ready url=%s\n", is.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
