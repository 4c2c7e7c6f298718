//go:build tools

// Package seaweedfs pins the SeaweedFS server that the S3 tests start.
// It is its own module because SeaweedFS needs a replace directive that
// would otherwise leak into lakegate's go.mod.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
