//go:build !unix

package testservers

import (
	"testing"
	"time"
)

// Seaweed is a running SeaweedFS; see seaweed.go (unix only).
type Seaweed struct {
	Endpoint, Bucket, URL, Dir string
	Startup                    time.Duration
}

// StartSeaweed skips the test: starting SeaweedFS is supported on unix only.
func StartSeaweed(t testing.TB) *Seaweed {
	t.Skip("seaweedfs test server: unix only")
	return nil
}

// BucketURL is unreachable off unix.
func (s *Seaweed) BucketURL(bucket string) string { return "" }

// CreateBucket is unreachable off unix.
func (s *Seaweed) CreateBucket(t testing.TB, bucket string) string { return "" }
