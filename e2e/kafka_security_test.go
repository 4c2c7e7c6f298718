package e2e

// The Kafka listener of a secured node: TLS, SASL/PLAIN and
// SASL/OAUTHBEARER with lakegate tokens, and the Pulsar grants.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func TestKafkaSecurity(t *testing.T) {
	n := startSecureNode(t, "--kafka-addr", "127.0.0.1:0", "--kafka-tls")
	if n.kafkaAddr == "" {
		t.Fatal("no Kafka listener in the ready line")
	}
	pool, err := loadPool(n.certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	client := func(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		all := []kgo.Opt{kgo.SeedBrokers(n.kafkaAddr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}),
			kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}
		if m != nil {
			all = append(all, kgo.SASL(m))
		}
		cl, err := kgo.NewClient(append(all, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	plainTok := func(tok string) sasl.Mechanism { return plain.Auth{User: "ignored", Pass: tok}.AsMechanism() }
	bearer := func(tok string) sasl.Mechanism { return oauth.Auth{Token: tok}.AsMechanism() }
	ctx := ctxFor(t, 60*time.Second)

	adm := n.admin(t, n.token(t, "admin", time.Hour))
	ns, _ := utils.GetNamespaceName("public/default")
	if err := adm.Namespaces().GrantNamespacePermission(*ns, "writer", []utils.AuthAction{"produce"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().GrantNamespacePermission(*ns, "reader", []utils.AuthAction{"consume"}); err != nil {
		t.Fatal(err)
	}
	super := client(plainTok(n.token(t, "admin", time.Hour)))
	createKafkaTopic(t, super, "sec", 1)

	t.Run("NoCredentials", func(t *testing.T) {
		cl := client(nil)
		err := cl.Ping(ctx)
		if err == nil {
			t.Fatal("a client without SASL was served")
		}
		t.Logf("without SASL: %v", err)
	})
	t.Run("PreAuthRequestBound", func(t *testing.T) {
		// Before authenticating, a request of more than 512 KiB closes the
		// connection before the node reads (or holds) it; clients that
		// authenticate are served meanwhile.
		nc, err := tls.Dial("tcp", n.kafkaAddr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte{0, 0x10, 0, 0}); err != nil { // 1 MiB announced
			t.Fatal(err)
		}
		// Closed at once (EOF), not left waiting for the body (a timeout).
		var ne net.Error
		if _, err := io.ReadFull(nc, make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("an anonymous 1 MiB request: %v, want the connection closed", err)
		}
		if err := super.Ping(ctx); err != nil {
			t.Fatalf("an authenticated client after it: %v", err)
		}
	})
	t.Run("BadToken", func(t *testing.T) {
		cl := client(plainTok("not-a-token"))
		if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("a bad token: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	t.Run("WriterProducesOnly", func(t *testing.T) {
		cl := client(plainTok(n.token(t, "writer", time.Hour)), kgo.DefaultProduceTopic("sec"))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("w")}).FirstErr(); err != nil {
			t.Fatalf("writer produce: %v", err)
		}
		if err := consumeOne(ctx, client(plainTok(n.token(t, "writer", time.Hour)), kgo.ConsumeTopics("sec"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("writer fetch: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("ReaderConsumesOnly", func(t *testing.T) {
		cl := client(bearer(n.token(t, "reader", time.Hour)), kgo.ConsumeTopics("sec"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err := consumeOne(ctx, cl); err != nil {
			t.Fatalf("reader fetch: %v", err)
		}
		pr := client(bearer(n.token(t, "reader", time.Hour)), kgo.DefaultProduceTopic("sec"))
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("r")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("reader produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("GroupIsSubscription", func(t *testing.T) {
		// A namespace restricts subscription "locked" to role "other": the
		// reader may commit for any group but that one.
		if err := adm.Namespaces().GrantSubPermission(*ns, "locked", []string{"other"}); err != nil {
			t.Fatal(err)
		}
		cl := client(bearer(n.token(t, "reader", time.Hour)))
		commit := func(group string) error {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = group, -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "sec"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if err := commit("free"); err != nil {
			t.Fatalf("commit for group free: %v", err)
		}
		if err := commit("locked"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("commit for group locked: %v, want GROUP_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("TransactionalIDIsItsRoles", func(t *testing.T) {
		// The first role to initialise a transactional.id owns it: another
		// role with the produce grant cannot fence it, a superuser can.
		if err := adm.Namespaces().GrantNamespacePermission(*ns, "writer2", []utils.AuthAction{"produce"}); err != nil {
			t.Fatal(err)
		}
		initID := func(cl *kgo.Client) error {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("sec-tid"), 60_000
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		if err := initID(client(plainTok(n.token(t, "writer", time.Hour)))); err != nil {
			t.Fatalf("the first role: %v", err)
		}
		if err := initID(client(plainTok(n.token(t, "writer2", time.Hour)))); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("another role: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
		}
		if err := initID(super); err != nil {
			t.Fatalf("a superuser: %v", err)
		}
		if err := initID(client(plainTok(n.token(t, "writer", time.Hour)))); err != nil {
			t.Fatalf("the owner again: %v", err)
		}
	})
	t.Run("OnlyAdminsCreate", func(t *testing.T) {
		cl := client(plainTok(n.token(t, "writer", time.Hour)))
		if err := createTopicErr(ctx, cl, "sec2"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("writer create: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
}

// consumeOne polls until a record arrives or a fetch error does.
func consumeOne(ctx context.Context, cl *kgo.Client) error {
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return ferr
		}
		if fs.NumRecords() > 0 {
			return nil
		}
	}
}
