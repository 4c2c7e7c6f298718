package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// message is one entry of the JSON spec (see doc.go).
type message struct {
	PayloadB64  string            `json:"payload_b64"`
	Key         string            `json:"key"`
	Properties  map[string]string `json:"properties"`
	EventTimeMs int64             `json:"event_time_ms"`
}

// maxSpecBytes bounds the spec read from stdin.
const maxSpecBytes = 16 << 20

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crosslang:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: crosslang produce|consume [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	url := fs.String("url", "", "Pulsar service URL")
	topic := fs.String("topic", "", "topic")
	sub := fs.String("sub", "crosslang", "subscription (consume)")
	n := fs.Int("n", 0, "messages to receive (consume)")
	batching := fs.Bool("batching", false, "batch the messages (produce)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole run")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *url == "" || *topic == "" {
		return errors.New("-url and -topic are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               *url,
		OperationTimeout:  *timeout,
		ConnectionTimeout: *timeout,
		Logger:            plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		return err
	}
	defer client.Close()
	switch args[0] {
	case "produce":
		return produce(ctx, client, *topic, *batching, stdin)
	case "consume":
		if *n <= 0 {
			return errors.New("consume needs -n > 0")
		}
		return consume(ctx, client, *topic, *sub, *n, stdout)
	default:
		return fmt.Errorf("unknown command %q (want produce or consume)", args[0])
	}
}

func produce(ctx context.Context, client pulsar.Client, topic string, batching bool, stdin io.Reader) error {
	raw, err := io.ReadAll(io.LimitReader(stdin, maxSpecBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > maxSpecBytes {
		return fmt.Errorf("spec larger than %d bytes", maxSpecBytes)
	}
	var spec []message
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching})
	if err != nil {
		return err
	}
	defer p.Close()
	errs := make(chan error, len(spec))
	for i, m := range spec {
		payload, err := base64.StdEncoding.DecodeString(m.PayloadB64)
		if err != nil {
			return fmt.Errorf("spec message %d: %w", i, err)
		}
		pm := &pulsar.ProducerMessage{Payload: payload, Key: m.Key, Properties: m.Properties}
		if m.EventTimeMs != 0 {
			pm.EventTime = time.UnixMilli(m.EventTimeMs)
		}
		p.SendAsync(ctx, pm, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		return err
	}
	for range spec {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func consume(ctx context.Context, client pulsar.Client, topic, sub string, n int, stdout io.Writer) error {
	c, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: sub,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	out := make([]message, 0, n)
	for len(out) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			return fmt.Errorf("received %d of %d: %w", len(out), n, err)
		}
		var et int64
		if !m.EventTime().IsZero() {
			et = m.EventTime().UnixMilli()
		}
		props := m.Properties()
		if props == nil {
			props = map[string]string{}
		}
		out = append(out, message{
			PayloadB64: base64.StdEncoding.EncodeToString(m.Payload()), Key: m.Key(),
			Properties: props, EventTimeMs: et,
		})
		if err := c.Ack(m); err != nil {
			return err
		}
	}
	return json.NewEncoder(stdout).Encode(out)
}
