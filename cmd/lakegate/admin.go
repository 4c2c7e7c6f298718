package main

// lakegate admin: flags and commands of the admin REST client (the client
// itself is package adminclient).
//
//	lakegate admin [--url URL] [--json] topics list <tenant/namespace>
//	lakegate admin topics create <topic> [--partitions N]
//	lakegate admin topics delete <topic> [--force]
//	lakegate admin topics stats <topic>
//	lakegate admin subscriptions list <topic>
//	lakegate admin subscriptions reset <topic> <sub> (--time T | --id ID)
//	lakegate admin tables <topic>
//	lakegate admin transactions (stats | metadata <most> <least> | slow <duration> | abort <most> <least>)
//	lakegate admin doctor [--cluster]
//
// A topic is "persistent://tenant/ns/name", "tenant/ns/name" or "name"
// (public/default). --url defaults to $LAKEGATE_ADMIN_URL, else
// http://127.0.0.1:8080; --token (default $LAKEGATE_ADMIN_TOKEN) is sent as
// a bearer token. Output is aligned tables; --json prints the
// server's JSON instead. A server error prints its HTTP status and reason.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/adminclient"
)

const defaultAdminURL = "http://127.0.0.1:8080"

const adminUsage = `usage: lakegate admin [--url URL] [--json] <command>

commands:
  topics list <tenant/namespace>
  topics create <topic> [--partitions N]
  topics delete <topic> [--force]
  topics stats <topic>
  subscriptions list <topic>
  subscriptions reset <topic> <subscription> (--time T | --id ID)
      T: RFC 3339 time, Unix milliseconds, or a duration ago (10m)
      ID: ledger:entry[:partition], earliest or latest
  tables <topic>
  transactions stats
      every transaction coordinator: its state, ongoing transactions, node
  transactions metadata <mostSigBits> <leastSigBits>
  transactions slow <duration>
      the transactions open longer than duration (10m) and not ended
  transactions abort <mostSigBits> <leastSigBits>
  doctor [--cluster]
      checks the node (with --cluster: every member) — etcd, object store,
      members, owners, table lag — and says what is wrong; exits 1 on a failure

A topic is persistent://tenant/ns/name, tenant/ns/name or name (public/default).
--url defaults to $LAKEGATE_ADMIN_URL, else ` + defaultAdminURL + `.
--token T (default $LAKEGATE_ADMIN_TOKEN) authenticates as a Pulsar token does.
`

// adminOpts are the flags of an admin command (accepted anywhere on the
// command line, as --name value, --name=value or -name).
type adminOpts struct {
	url     string
	token   string
	cluster bool // doctor: every member
	adminclient.Options
}

// parseAdminArgs splits flags from positional arguments.
func parseAdminArgs(args []string, environ []string) (adminOpts, []string, error) {
	o := adminOpts{url: defaultAdminURL}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LAKEGATE_ADMIN_URL="); ok && v != "" {
			o.url = v
		}
		if v, ok := strings.CutPrefix(kv, "LAKEGATE_ADMIN_TOKEN="); ok && v != "" {
			o.token = v
		}
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "url":
			o.url, err = value()
		case "json":
			o.JSON = !hasVal || val == "true"
		case "cluster":
			o.cluster = !hasVal || val == "true"
		case "token":
			o.token, err = value()
		case "force":
			o.Force = !hasVal || val == "true"
		case "partitions":
			var s string
			if s, err = value(); err == nil {
				o.Partitions, err = strconv.Atoi(s)
				if err != nil || o.Partitions < 0 {
					err = fmt.Errorf("--partitions %q: want a number ≥ 0", s)
				}
			}
		case "time":
			o.Time, err = value()
		case "id":
			o.ID, err = value()
		case "h", "help":
			return o, nil, errAdminHelp
		default:
			err = fmt.Errorf("unknown flag %s", a)
		}
		if err != nil {
			return o, nil, err
		}
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return o, nil, fmt.Errorf("--url %q: want http://host:port", o.url)
	}
	o.url = strings.TrimSuffix(o.url, "/")
	return o, pos, nil
}

var errAdminHelp = errors.New("help")

// runAdmin runs one admin command, writing its output to out.
func runAdmin(args []string, environ []string, out io.Writer) error {
	o, pos, err := parseAdminArgs(args, environ)
	switch {
	case errors.Is(err, errAdminHelp):
		fmt.Fprint(out, adminUsage)
		return nil
	case err != nil:
		return err
	case len(pos) == 0:
		fmt.Fprint(out, adminUsage)
		return errors.New("no admin command given")
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminclient.Timeout)
	defer cancel()
	c := adminclient.New(o.url).WithToken(o.token)
	want := func(n int, usage string) error {
		if len(pos) != n {
			return fmt.Errorf("usage: lakegate admin %s", usage)
		}
		return nil
	}
	cmd := strings.Join(pos[:min(2, len(pos))], " ")
	switch {
	case cmd == "topics list":
		if err := want(3, "topics list <tenant/namespace>"); err != nil {
			return err
		}
		return c.TopicsList(ctx, o.Options, pos[2], out)
	case cmd == "topics create":
		if err := want(3, "topics create <topic> [--partitions N]"); err != nil {
			return err
		}
		return c.TopicsCreate(ctx, o.Options, pos[2], out)
	case cmd == "topics delete":
		if err := want(3, "topics delete <topic> [--force]"); err != nil {
			return err
		}
		return c.TopicsDelete(ctx, o.Options, pos[2], out)
	case cmd == "topics stats":
		if err := want(3, "topics stats <topic>"); err != nil {
			return err
		}
		return c.TopicsStats(ctx, o.Options, pos[2], out)
	case cmd == "subscriptions list":
		if err := want(3, "subscriptions list <topic>"); err != nil {
			return err
		}
		return c.SubscriptionsList(ctx, o.Options, pos[2], out)
	case cmd == "subscriptions reset":
		if err := want(4, "subscriptions reset <topic> <subscription> (--time T | --id ID)"); err != nil {
			return err
		}
		return c.SubscriptionsReset(ctx, o.Options, pos[2], pos[3], out)
	case cmd == "transactions stats":
		if err := want(2, "transactions stats"); err != nil {
			return err
		}
		return c.TxnStats(ctx, o.Options, out)
	case cmd == "transactions metadata":
		if err := want(4, "transactions metadata <mostSigBits> <leastSigBits>"); err != nil {
			return err
		}
		return c.TxnMetadata(ctx, o.Options, pos[2], pos[3], out)
	case cmd == "transactions slow":
		if err := want(3, "transactions slow <duration>"); err != nil {
			return err
		}
		return c.TxnSlow(ctx, o.Options, pos[2], out)
	case cmd == "transactions abort":
		if err := want(4, "transactions abort <mostSigBits> <leastSigBits>"); err != nil {
			return err
		}
		return c.TxnAbort(ctx, pos[2], pos[3], out)
	case pos[0] == "doctor":
		if err := want(1, "doctor [--cluster]"); err != nil {
			return err
		}
		return c.Doctor(ctx, o.Options, o.cluster, out)
	case pos[0] == "tables":
		if err := want(2, "tables <topic>"); err != nil {
			return err
		}
		return c.Tables(ctx, o.Options, pos[1], out)
	}
	return fmt.Errorf("unknown admin command %q (lakegate admin --help)", strings.Join(pos, " "))
}
