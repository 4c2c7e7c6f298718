package testservers

import (
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// EnvGCSEmulator is the variable through which the GCS client library (and
// so gocloud's gcsblob) finds an emulator: "host:port", plain HTTP.
const EnvGCSEmulator = "STORAGE_EMULATOR_HOST"

// gcsStartAttempts bounds the retries when the chosen port is taken between
// choosing and listening.
const gcsStartAttempts = 3

// GCS is an in-process fake-gcs-server (memory backend, plain HTTP on
// loopback). It honours ifGenerationMatch=0 under one lock over the check
// and the write, so conditional creates are atomic.
type GCS struct {
	// Server is the fake, for direct inspection.
	Server *fakestorage.Server
	// Host is "127.0.0.1:PORT".
	Host string
	// Bucket is the bucket created at start.
	Bucket string
	// URL is the gocloud URL of Bucket, see BucketURL.
	URL string
}

// StartGCS starts fake-gcs-server, creates a bucket, points the GCS client
// library at it by setting STORAGE_EMULATOR_HOST with t.Setenv (so neither
// the test nor its parents may be parallel, and a process talks to one GCS
// fake at a time), and stops it in t's cleanup.
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	var errs []error
	for range gcsStartAttempts {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatalf("fake-gcs-server: %v", err)
		}
		host := "127.0.0.1:" + strconv.Itoa(ports[0])
		srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
			Scheme: "http",
			Host:   "127.0.0.1",
			Port:   uint16(ports[0]),
			// The client reads objects with GET http://HOST/BUCKET/OBJECT
			// (the XML API); the fake serves that path only for its public
			// host, "storage.googleapis.com" unless set.
			PublicHost:  host,
			ExternalURL: "http://" + host,
			Writer:      io.Discard,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.Cleanup(srv.Stop)
		t.Setenv(EnvGCSEmulator, host)
		g := &GCS{Server: srv, Host: host, Bucket: "lakegate-test"}
		g.URL = g.CreateBucket(t, g.Bucket)
		return g
	}
	t.Fatalf("fake-gcs-server: %v", errors.Join(errs...))
	return nil
}

// CreateBucket creates another bucket and returns its gocloud URL.
func (g *GCS) CreateBucket(t testing.TB, bucket string) string {
	t.Helper()
	g.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return g.BucketURL(bucket)
}

// BucketURL returns "gs://BUCKET?anonymous=true": with STORAGE_EMULATOR_HOST
// set the client sends to the emulator, and anonymous skips the search for
// Google credentials.
func (g *GCS) BucketURL(bucket string) string {
	return "gs://" + bucket + "?anonymous=true"
}
